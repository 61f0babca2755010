"""The lowered plan as Argo templates: one loop over a scope's units (``emit``), as the KFP
and Flyte renderers have.

| unit | Argo |
|---|---|
| Step | a task running the step's container template (``il.map``: ``withParam`` over the items, enumerated by an expression; with ``concurrency`` inside a DAG of its own with ``parallelism``) |
| Block | ``when`` on each of its tasks (nested blocks: the conditions joined with ``&&``) |
| Chain | each block's ``when``; a branch value is an expression picking the output of the branch whose task succeeded |
| Call | a nested DAG template ``sub-<call>`` (its whole-body finally step: the call task's exit hook) |
| FinallyScope | a nested DAG template for the block, its finally step the task's ``exit`` lifecycle hook |
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from interlock.core.backend.plan import Block, Call, Chain, FinallyScope, Plan, Step, Unit
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.conditions import COMPARISONS, Cond, Op, condition_of
from interlock.core.model.failure_policy import STOP
from interlock.core.model.joins import READS_MISSING, RunIf, may_not_produce, rule_of, upstreams
from interlock.core.model.pipeline_spec import Node
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.types import TypeSpec

from .gates import kept_ports
from .joins import MISSING, depends, down_expr
from .names import Names, param
from .options import DEFAULT_IMAGE, ArgoOptions
from .policies import apply_step, memoize
from .refs import Dag, Ref
from .tolerance import ENVELOPE
from .values import HASH_SUFFIX, raw_text

IN_DIR = "/tmp/interlock/in"
OUT_DIR = "/tmp/interlock/out"
ENTRY = ["python", "-m", "interlock.adapters.argo.entry"]
ENDED = ("Succeeded", "Failed", "Errored", "Skipped", "Omitted")


class Renderer:
    def __init__(self, plan: Plan, opts: ArgoOptions):
        self.plan, self.spec, self.opts = plan, plan.spec, opts
        self.templates: list[dict[str, Any]] = []
        self.template_names = Names()
        self.dag_of: dict[str, Dag] = {}  # node -> the DAG whose task runs it
        self.labels = dict(self.spec.labels)
        self.fail_fast = self.spec.failure_policy == STOP
        self._ptypes = {p.name: p.type for p in self.spec.params}
        self._kept = kept_ports(self.spec)
        self._maps = [n.name for n in self.spec.nodes if n.map is not None]
        self._tolerant: set[str] = set()
        self._joins: dict[tuple[str, str], tuple[RunIf, dict[str, bool]]] = {}  # (dag, task) -> rule, upstreams

    # -- the loop -------------------------------------------------------------------------
    def main(self) -> Dag:
        root = self._dag("main")
        self.emit(self.plan.units, root, [])
        self._finish(root)
        return root

    def _dag(self, name: str, parent: Dag | None = None, call: dict[str, Any] | None = None) -> Dag:
        t: dict[str, Any] = {"name": self.template_names.take(name, 128), "dag": {"tasks": []}}
        if not self.fail_fast:
            t["dag"]["failFast"] = False
        self.templates.append(t)
        return Dag(t["name"], t, parent, call)

    def emit(self, units: tuple[Unit, ...], dag: Dag, conds: list[When]) -> None:
        for u in units:
            if isinstance(u, Step):
                self.step(u.node, dag, conds, wrapped=dag.name.endswith("-map") and len(units) == 1)
            elif isinstance(u, Block):
                self.emit(u.units, dag, [*conds, self.when(u.gate, dag)])
            elif isinstance(u, Chain):
                for b in u.blocks:
                    self.emit(b.units, dag, [*conds, self.when(b.gate, dag)])
            elif isinstance(u, Call):
                inner = self.nested(f"sub-{u.call.name}", dag, conds, u.call.name, u.units)
                if u.finally_ is not None:
                    self.exit_hook(inner, u.finally_, dag)
            elif isinstance(u, FinallyScope):
                inner = self.nested(u.key, dag, conds, u.key, u.units)
                self.exit_hook(inner, u.block.node, dag)
            else:  # pragma: no cover - a new unit kind needs a rendering here
                raise TypeError(f"unknown plan unit {u!r}")

    def nested(self, name: str, dag: Dag, conds: list[When], task_name: str, units: tuple[Unit, ...],
               parallelism: int | None = None) -> Dag:
        task: dict[str, Any] = {"name": dag.names.take(task_name)}
        inner = self._dag(name, dag, task)
        task["template"] = inner.name
        if parallelism:
            inner.template["parallelism"] = parallelism
        _when(task, conds, dag.deps.setdefault(task["name"], set()))
        dag.tasks.append(task)
        dag.child[task["name"]] = inner
        self.emit(units, inner, [])
        self._finish(inner)
        return inner

    def _finish(self, dag: Dag) -> None:
        """Write each task's ``depends`` once every reference inside it is known."""
        for task in dag.tasks:
            deps = sorted(dag.deps.get(task["name"], set()) - {task["name"]})
            rule, ruled = self._joins.get((dag.name, task["name"]), (None, {}))
            terms = [d for d in deps if d not in ruled]
            if rule is not None:
                terms.append(f"({depends(rule, ruled, self._down_in(dag))})")
            if terms:
                task["depends"] = " && ".join(terms)
        dag.template["dag"]["tasks"] = dag.tasks

    # -- one step -------------------------------------------------------------------------
    def step(self, node: Node, dag: Dag, conds: list[When], wrapped: bool = False) -> None:
        m = node.map
        if m is not None and m.concurrency and not wrapped:
            inner = self.nested(f"{node.name}-map", dag, conds, f"{node.name}-map", (Step(node),),
                                parallelism=m.concurrency)
            del inner  # the map's task lives in its own DAG: readers reach it through exports
            return
        if self.spec.step_of(node).distributed is not None:
            self.distributed(node, dag, conds)
            return
        name = dag.names.take(node.name)
        dag.rep[node.name] = name
        self.dag_of[node.name] = dag
        task: dict[str, Any] = {"name": name}
        dag.tasks.append(task)
        deps = dag.deps.setdefault(name, set())
        template = self.container(node, task, dag, deps)
        task["template"] = template["name"]
        _when(task, conds, deps)
        for up in node.after:
            self._after(dag, up, deps)
        # A join's rule, and the default rule after a join: Argo's plain `u` reads an upstream its
        # own rule omitted as not succeeded, where it may only have been skipped.
        if node.run_if is not None or any(self.spec.node(u).run_if is not None for u in upstreams(node)[0]):
            self.join(node, name, dag)
        if m is not None and m.tolerate:
            self.tolerance(node, name, dag)

    def distributed(self, node: Node, dag: Dag, conds: list[When]) -> None:
        """A distributed step: ``<node>-inputs`` (artifacts onto the volume), ``<node>`` (the
        TrainJob's resource template, its exit hook ``<node>-settle`` recording a failed job's
        verdict), ``<node>-outputs`` (what readers read); distributed.py."""
        from . import distributed as d

        spec, step = self.spec, self.spec.step_of(node)
        if node.map is not None:
            raise PipelineDefinitionError("il.map of a distributed step: each item would be a TrainJob of its own",
                                          pipeline=spec.name, step=node.name,
                                          hint="map a plain step, or make the distributed step take the whole list")
        d.require_state_volume(spec, node.name, self.opts)
        # The node's inputs as a container step reads them, then split: artifacts to the inputs task.
        scratch: dict[str, Any] = {"name": node.name, "container": {"args": []}}
        call: dict[str, Any] = {}
        io, deps = _TemplateIO(scratch, call), set[str]()
        types = {p.name: p.type for p in step.inputs}
        for port, b in node.inputs:
            parts = list(enumerate(b.items)) if b.kind is BindingKind.LIST else [(None, b)]
            for index, one in parts:
                label = port if index is None else f"{port}[{index}]"
                self.input(label, one, types[port].args[0] if index is not None else types[port], dag, io, deps)
        flat = scratch["container"]["args"]
        given = [(flat[i + 1], flat[i + 2], flat[i + 3]) for i in range(0, len(flat), 4)]
        rank_in = [("state", port, f"in/{value.rsplit('/', 1)[-1]}") if kind == "artifact" else (kind, port, value)
                   for kind, port, value in given]
        params = [p["name"] for p in scratch.get("inputs", {}).get("parameters", [])]
        common = ["--pipeline", spec.ref or "", "--node", node.name, "--fingerprint", step.fingerprint]
        first: dict[str, Any] | None = None
        if scratch.get("inputs", {}).get("artifacts"):
            stage = d.small_template(self.template_names.take(f"{node.name}-inputs", 128), spec, step, self.opts,
                                     ["stage", *common, *[x for g in given if g[0] == "artifact" for x in ("--in", *g)]],
                                     ENTRY)
            stage["inputs"] = {"artifacts": scratch["inputs"]["artifacts"]}
            self.templates.append(stage)
            first = {"name": dag.names.take(f"{node.name}-inputs"), "template": stage["name"],
                     "arguments": {"artifacts": call["arguments"]["artifacts"]}}
        job = d.resource_template(self.template_names.take(node.name, 128), spec, step, node.name, self.opts,
                                  rank_in, params)
        self.templates.append(job)
        job_task: dict[str, Any] = {"name": dag.names.take(node.name), "template": job["name"]}
        if params:
            job_task["arguments"] = {"parameters": call["arguments"]["parameters"]}
        verdict = d.small_template(self.template_names.take(f"{node.name}-settle", 128), spec, step, self.opts,
                                   ["settle", *common], ENTRY)
        self.templates.append(verdict)
        job_task["hooks"] = {"exit": {"template": verdict["name"]}}  # a failed job's verdict, after its retries
        keep = [x for port in sorted(self._kept.get(node.name, ())) for x in ("--keep", port)]
        publish = d.small_template(self.template_names.take(f"{node.name}-outputs", 128), spec, step, self.opts,
                                   ["publish", *common, "--out", OUT_DIR, *keep], ENTRY)
        if outs := d.output_declarations(step, OUT_DIR):
            publish["outputs"] = outs
        self.templates.append(publish)
        out_task = {"name": dag.names.take(f"{node.name}-outputs"), "template": publish["name"]}
        tasks = [t for t in (first, job_task, out_task) if t is not None]
        for before, task in zip([None, *tasks], tasks, strict=False):
            dag.tasks.append(task)
            own = dag.deps.setdefault(task["name"], set())
            own.update(deps if task is not out_task else ())  # the job also reads parameters
            own.update({before["name"]} if before is not None else ())
            _when(task, conds, own)
            for up in node.after if before is None else ():
                self._after(dag, up, own)
        dag.rep[node.name] = out_task["name"]  # readers read the outputs task
        self.dag_of[node.name] = dag

    def join(self, node: Node, name: str, dag: Dag) -> None:
        """The task's join rule as its ``depends`` expression over its upstreams' tasks (joins.py)."""
        ups, reads = upstreams(node)
        tasks: dict[str, bool] = {}
        for up in sorted(ups):
            found: set[str] = set()
            if self.dag_of.get(up) is dag:
                self._after(dag, up, found)
            if not found and node.run_if is None:  # the default rule after a join elsewhere: the plain depends
                continue
            if not found:
                raise PipelineDefinitionError(
                    f"run_if={rule_of(node).value!r} joins {up!r}, which runs in another DAG (a finally block, a "
                    "call or a map's): Argo's depends names tasks of its own DAG only", pipeline=self.spec.name,
                    step=node.name, hint="call the join in the same block or sub-pipeline as the steps it joins (a map: without "
                    "concurrency=)")
            [task] = found
            tasks[task] = tasks.get(task, False) or up in reads
        if tasks:
            self._joins[(dag.name, name)] = (rule_of(node), tasks)

    def _down_in(self, dag: Dag) -> Callable[[str], str]:
        if self.fail_fast:  # nothing starts after a failure: no task is omitted behind one before a join
            return lambda t: f"{t}.Failed || {t}.Errored"
        return lambda t: down_expr(t, lambda u: dag.deps.get(u, set()))

    def tolerance(self, node: Node, items: str, dag: Dag) -> None:
        """The ``<node>-tolerance`` task after a tolerant map (tolerance.py); the readers read it."""
        name = dag.names.take(f"{node.name}-tolerance")
        envelopes = f"tasks['{items}'].outputs?.parameters?.{ENVELOPE} ?? '[]'"
        task = {"name": name, "template": self.template_names.take(f"{node.name}-tolerance", 128),
                "depends": items, "arguments": {"parameters": [{"name": "envelopes", "value": f"{{{{={envelopes}}}}}"}]}}
        outputs = [{"name": p.name, "valueFrom": {"path": f"{OUT_DIR}/{p.name}"}} for p in self.spec.step_of(node).outputs]
        t: dict[str, Any] = {
            "name": task["template"], "inputs": {"parameters": [{"name": "envelopes"}]},
            "container": {"image": self.spec.step_of(node).image or self.opts.image or DEFAULT_IMAGE,
                          "command": list(ENTRY),
                          "args": ["tolerance", "--pipeline", self.spec.ref or "", "--node", node.name, "--out", OUT_DIR,
                                   "--envelopes", "{{inputs.parameters.envelopes}}"]}}
        if outputs:
            t["outputs"] = {"parameters": outputs}
        self.templates.append(t)
        dag.tasks.append(task)
        dag.rep[node.name] = name  # its readers read the lists with None at failed items
        self._tolerant.add(node.name)

    def _after(self, dag: Dag, up: str, deps: set[str]) -> None:
        owner = self.dag_of.get(up)
        if owner is None:
            return
        if owner is dag:
            deps.add(dag.rep[up])
            return
        down = dag._toward(owner)
        if down is not None and down.call is not None:
            deps.add(down.call["name"])
            return
        # Outside this DAG: the task that runs this DAG waits for it.
        d = dag
        while d.parent is not None and d.call is not None and d is not owner:
            p = d.parent
            if owner is p or p._toward(owner) is not None:
                self._after(p, up, p.deps.setdefault(d.call["name"], set()))
                return
            d = p

    def container(self, node: Node, task: dict[str, Any], dag: Dag, deps: set[str], mode: str = "run",
                  extra_args: list[str] | None = None) -> dict[str, Any]:
        """The node's container template; fills ``task``'s arguments for what the node reads."""
        spec, step = self.spec, self.spec.step_of(node)
        tname = self.template_names.take(node.name, 128)
        args = [mode, "--pipeline", spec.ref or "", "--node", node.name, "--fingerprint", step.fingerprint,
                "--out", OUT_DIR, *(extra_args or [])]
        for port in sorted(self._kept.get(node.name, ())):
            args += ["--keep", port]
        if mode == "finally" and (self.spec.gates or self._maps):  # its block's status reads them (gates.py)
            for p in self.spec.params:
                args += ["--param", p.name, f"{{{{workflow.parameters.{p.name}}}}}"]
        t: dict[str, Any] = {"name": tname, "container": {"image": step.image or self.opts.image or DEFAULT_IMAGE,
                                                           "command": list(ENTRY), "args": args}}
        io = _TemplateIO(t, task, cached=mode == "run" and step.cache is not None and step.cache.enabled, node=node)
        key_parts: list[str] = []
        ignored = set(step.cache.ignore_inputs) if step.cache is not None else set()
        types = {p.name: p.type for p in step.inputs}
        m = node.map
        mapped = {m.item, *m.zipped} if m is not None else set()
        for port, b in node.inputs:
            if port in mapped:
                continue
            parts = list(enumerate(b.items)) if b.kind is BindingKind.LIST else [(None, b)]
            for index, one in parts:
                label = port if index is None else f"{port}[{index}]"
                if mode != "run" and one.kind is BindingKind.OUTPUT:
                    self._kept_input(node, label, one, io)
                    continue
                t_port = types[port].args[0] if index is not None and types[port].args else types[port]
                part = self.input(label, one, t_port, dag, io, deps)
                if part is not None and port not in ignored:
                    key_parts.append(part)
        if m is not None:
            self.fan_out(node, m, task, dag, io, deps, types, key_parts)
        held = [p.name for p in step.outputs if p.type.is_artifact] if m is not None else []
        if held and not self.opts.state_pvc:
            raise PipelineDefinitionError(
                f"il.map of a step with artifact output {held[0]!r}: Argo aggregates the items' parameters, "
                "not their artifacts", pipeline=spec.name, step=node.name,
                hint="compile with state_pvc=CLAIM: the items then keep those outputs on the run's volume and "
                "their readers get the list of their paths")
        tolerant = m is not None and bool(m.tolerate)
        if tolerant and held:
            raise PipelineDefinitionError(
                f"il.map(tolerate=...) of a step with artifact output {held[0]!r}: the items' envelopes carry "
                "values, not artifacts", pipeline=spec.name, step=node.name,
                hint="return values (a path or a URI as str) from the mapped step, or drop the tolerance")
        if tolerant:
            args.append("--tolerant")
            io.output("parameters", {"name": ENVELOPE, "valueFrom": {"path": f"{OUT_DIR}/{ENVELOPE}"}})
        if held:
            args.append("--volume-outputs")
        for p in () if tolerant else step.outputs:
            if p.type.is_artifact and not held:
                io.output("artifacts", {"name": p.name, "path": f"{OUT_DIR}/{p.name}"})
                io.output("parameters", {"name": f"{p.name}{HASH_SUFFIX}",
                                         "valueFrom": {"path": f"{OUT_DIR}/{p.name}{HASH_SUFFIX}"}})
            else:
                io.output("parameters", {"name": p.name, "valueFrom": {"path": f"{OUT_DIR}/{p.name}"}})
        apply_step(t, spec.name, step, self.opts, self.labels)
        # A tolerant item's envelope may say it failed: memoized, a failure would be served again.
        if mode == "run" and not tolerant and (memo := memoize(spec.name, step, key_parts, self.opts)) is not None:
            t["memoize"] = memo
        self.templates.append(t)
        return t

    def input(self, label: str, b: Binding, t: TypeSpec, dag: Dag, io: _TemplateIO, deps: set[str]) -> str | None:
        """One input of the node: its ``--in`` argument, the template input and the task
        argument feeding it. Returns its part of the memoize key (an expression), if any."""
        pname = param(label.replace("[", "-").replace("]", ""))
        if b.kind is BindingKind.CONST:
            text = b.value if raw_text(t) and isinstance(b.value, str) else json.dumps(b.value)
            io.arg("json" if not raw_text(t) else "raw", label, text)
            return json.dumps(text)
        if b.kind is BindingKind.PARAM:
            ref = Ref(f"workflow.parameters.{b.param}", f"workflow.parameters['{b.param}']", False)
            src = self._ptypes[b.param or ""]
            kind = "raw" if raw_text(src) else "json"
        else:
            ref, src = self.value(b, dag)
            if b.kind is BindingKind.OUTPUT and b.field:
                label = f"{label}@{'.'.join(b.field)}"
                kind = "json"
            elif ref.artifact:
                kind = "artifact"
            elif self._gathered(b, dag):
                kind = "gather"
                ref = _or_empty(ref)
            else:
                kind = "raw" if raw_text(src) else "json"
            if not ref.artifact and self._may_miss(b, io):
                kind = f"{kind}?"  # the entry reads MISSING as None
                ref = _or_missing(ref)
        deps.update(ref.deps)
        if ref.artifact:
            io.artifact_in(pname, ref)
            io.arg("artifact", label, f"{IN_DIR}/{pname}")
            if b.kind is BindingKind.OUTPUT and io.cached:  # its content hash, for the cache key
                href = self._hash_ref(b, dag)
                deps.update(href.deps)
                io.param_in(f"{pname}{HASH_SUFFIX}", href)
                return f"inputs.parameters['{pname}{HASH_SUFFIX}']"
            return None
        io.param_in(pname, ref)
        io.arg(kind, label, f"{{{{inputs.parameters.{pname}}}}}")
        return f"inputs.parameters['{pname}']"

    def _kept_input(self, node: Node, label: str, b: Binding, io: _TemplateIO) -> None:
        """A finally step's input from a step of its scope: from the run state, where that step
        keeps the output (gates.py), None when it made none; an exit hook or onExit cannot
        resolve the outputs of the tasks it follows."""
        producer = b.node or ""
        if not (self.opts.state_pvc or self.opts.state_store):
            raise PipelineDefinitionError(
                f"finally step reads {producer}.{b.port}: Argo's exit hooks cannot resolve the outputs of the tasks "
                "they follow, so the step reads it from the run state, which needs a shared store",
                pipeline=self.spec.name, step=node.name,
                hint="compile with state_pvc=CLAIM or state_store=s3://BUCKET/PREFIX")
        if self.spec.node(producer).map is not None:
            raise PipelineDefinitionError(
                f"finally step reads the map {producer!r}: its items' outputs are not kept in the run state",
                pipeline=self.spec.name, step=node.name, hint="read a step that gathers the map's list")
        io.arg("kept", f"{label}@{'.'.join(b.field)}" if b.field else label, f"{producer}/{b.port}")

    def _may_miss(self, b: Binding, io: _TemplateIO) -> bool:
        """Does the reader run although ``b``'s producer made nothing (its join rule)?"""
        reader = io.node
        return (reader is not None and rule_of(reader) in READS_MISSING and b.kind is BindingKind.OUTPUT
                and bool(b.node) and may_not_produce(self.spec, b.node or "", reader))

    def _gathered(self, b: Binding, dag: Dag) -> bool:
        if b.kind is BindingKind.ONE_OF:  # il.branch_value over map outputs: the branch's list of item texts
            return all(self._gathered(o, dag) for o in b.options)
        n = self.spec.node(b.node) if b.kind is BindingKind.OUTPUT and b.node else None
        return n is not None and n.map is not None and n.name not in self._tolerant

    def _hash_ref(self, b: Binding, dag: Dag) -> Ref:
        return dag.resolve(self._owner(b.node or ""), b.node or "", f"{b.port}{HASH_SUFFIX}", False)

    def _owner(self, node: str) -> Dag:
        owner = self.dag_of.get(node)
        if owner is None:
            raise PipelineDefinitionError(f"reads {node!r} before it runs (the plan's order)", pipeline=self.spec.name)
        return owner

    def value(self, b: Binding, dag: Dag) -> tuple[Ref, TypeSpec]:
        """An OUTPUT or ONE_OF binding as this DAG reads it, and the type of what travels."""
        if b.kind is BindingKind.OUTPUT:
            node = b.node or ""
            step = self.spec.step_of(node)
            t = next(p.type for p in step.outputs if p.name == b.port)
            # A map's artifact outputs stay on the run's volume: its items output their paths.
            artifact = t.is_artifact and self.spec.node(node).map is None
            return dag.resolve(self._owner(node), node, b.port or "", artifact), t
        if b.kind is BindingKind.ONE_OF:
            options = [self.value(o, dag) for o in b.options]
            art = options[0][0].artifact
            expr = options[-1][0].expr
            for (ref, _), o in zip(reversed(options[:-1]), reversed(b.options[:-1]), strict=True):
                status = self._status_expr(o, dag)
                expr = f"({status} == 'Succeeded' ? {ref.expr} : {expr})"
            deps = frozenset().union(*(r.deps for r, _ in options))
            return Ref(f"={expr}", expr, art, deps), options[0][1]
        raise PipelineDefinitionError(f"argo cannot read {b.describe()} here", pipeline=self.spec.name)

    def _status_expr(self, b: Binding, dag: Dag) -> str:
        """Did the branch that gives option ``b`` run? Its task's status, seen from ``dag``."""
        node = b.node if b.kind is BindingKind.OUTPUT else next(iter(sorted(b.nodes())), None)
        owner = self.dag_of.get(node or "")
        if owner is dag:
            return f"tasks['{dag.rep[node or '']}'].status"
        down = dag._toward(owner) if owner is not None else None
        task = down.call["name"] if down is not None and down.call else dag.rep.get(node or "", "")
        return f"tasks['{task}'].status"

    def fan_out(self, node: Node, m: Any, task: dict[str, Any], dag: Dag, io: _TemplateIO, deps: set[str],
                types: dict[str, TypeSpec], key_parts: list[str]) -> None:
        """``withParam``: the list enumerated by an expression (``{i, v}`` per item, and each
        zipped list's element), so each item's shim runs as ``node[i]``."""
        lists: list[tuple[str, str]] = []  # (item field, list expression)
        for field_name, port in (("v", m.item), *((f"z{i}", p) for i, p in enumerate(m.zipped))):
            b = node.bindings[port]
            if b.kind is BindingKind.CONST:
                lists.append((field_name, f"fromJSON({json.dumps(json.dumps(b.value))})"))
                continue
            if b.kind is BindingKind.PARAM:
                expr = f"workflow.parameters['{b.param}']"
            else:
                ref, _ = self.value(b, dag)
                deps.update(ref.deps)
                expr = ref.expr
                if self._gathered(b, dag):  # a map's output: a list of each item's text
                    expr = f"map(fromJSON({expr}), fromJSON(#))"
                    lists.append((field_name, expr))
                    continue
            lists.append((field_name, f"fromJSON({expr})"))
        first = lists[0][1]
        fields = ", ".join(["'i': #index", "'v': #"] + [f"'{f}': ({e})[#index]" for f, e in lists[1:]])
        task["withParam"] = f"{{{{=toJson(map({first}, {{{fields}}}))}}}}"
        io.param_in("interlock-item", Ref("item.i", "item.i", False))
        io.add_args(["--item", "{{inputs.parameters.interlock-item}}"])
        for field_name, port in (("v", m.item), *((f"z{i}", p) for i, p in enumerate(m.zipped))):
            pname = param(port)
            io.param_in(pname, Ref(f"item.{field_name}", f"item.{field_name}", False))
            t = types[port]
            io.arg("raw" if raw_text(t) else "json", port, f"{{{{inputs.parameters.{pname}}}}}")
            key_parts.append(f"inputs.parameters['{pname}']")

    # -- finally steps ----------------------------------------------------------------------
    def exit_hook(self, inner: Dag, node: Node, dag: Dag) -> None:
        """``node`` as the exit lifecycle hook of the task running ``inner``: Argo runs it once
        that task ends, whatever its status; its shim settles the block's status from the run
        state and, for ``il.on_failure``, runs the step only if the block failed."""
        assert inner.call is not None
        hook: dict[str, Any] = {}
        self.dag_of[node.name] = dag
        dag.rep[node.name] = inner.call["name"]  # nothing runs after a hook; readers are refused below
        template = self.container(node, hook, dag, set(), mode="finally")
        hook["template"] = template["name"]
        inner.call.setdefault("hooks", {})["exit"] = hook

    def when(self, gate: Any, dag: Dag) -> When:
        deps: set[str] = set()
        return self.condition(condition_of(gate), dag, deps), frozenset(deps)

    def condition(self, c: Cond, dag: Dag, deps: set[str]) -> str:
        """A condition as Argo's ``when`` (govaluate after substitution)."""
        if c.op is Op.REF:
            return f"{self.operand(c.operands[0], dag, deps)} == true"
        if c.op in COMPARISONS:
            left, right = (self.operand(b, dag, deps) for b in c.operands)
            return f"{left} {c.op.value} {right}"
        if c.op is Op.NOT:
            return f"!({self.condition(c.terms[0], dag, deps)})"
        joiner = " && " if c.op is Op.AND else " || "
        return joiner.join(f"({self.condition(t, dag, deps)})" for t in c.terms)

    def operand(self, b: Binding, dag: Dag, deps: set[str]) -> str:
        if b.kind is BindingKind.CONST:
            v = b.value
            return json.dumps(v) if isinstance(v, bool | int | float) or v is None else f"'{v}'"
        if b.kind is BindingKind.PARAM:
            t = self._ptypes[b.param or ""]
            text = f"{{{{workflow.parameters.{b.param}}}}}"
            return f"'{text}'" if raw_text(t) else text
        ref, t = self.value(Binding.of_output(b.node or "", b.port or "") if b.field else b, dag)
        text = f"{{{{{ref.text}}}}}"
        if b.field:
            t_field = _field_type(t, b.field)
            text = f"{{{{=jsonpath({ref.expr}, '$.{'.'.join(b.field)}')}}}}"
            t = t_field or t
        deps.update(ref.deps)
        return f"'{text}'" if raw_text(t) else text


When = tuple[str, frozenset[str]]  # a block's condition as Argo's `when`, and the tasks it reads


def _when(task: dict[str, Any], conds: list[When], deps: set[str]) -> None:
    if conds:
        task["when"] = " && ".join(f"({c})" for c, _ in conds)
        for _, d in conds:
            deps.update(d)


def _or_empty(ref: Ref) -> Ref:
    """A map's aggregated output, or ``[]``: a map over an empty list ran no item, so Argo
    aggregates no output parameter for its readers."""
    m = re.fullmatch(r"tasks\.([^.]+)\.outputs\.parameters\.([A-Za-z0-9_]+)", ref.text)
    if m is None:
        return ref
    expr = f"tasks['{m[1]}'].outputs?.parameters?.{m[2]} ?? '[]'"
    return Ref(f"={expr}", f"({expr})", ref.artifact, ref.deps)


def _or_missing(ref: Ref) -> Ref:
    """An output of a task that may not have run, or ``MISSING``: Argo cannot resolve an
    output its task never made."""
    m = re.fullmatch(r"tasks\.([^.]+)\.outputs\.parameters\.([A-Za-z0-9_]+)", ref.text)
    if m is None:
        return ref
    expr = f"tasks['{m[1]}'].outputs?.parameters?.{m[2]} ?? '{MISSING}'"
    return Ref(f"={expr}", f"({expr})", ref.artifact, ref.deps)


def _field_type(t: TypeSpec, path: tuple[str, ...]) -> TypeSpec | None:
    for name in path:
        nxt = t.field_type(name)
        if nxt is None:
            return None
        t = nxt
    return t


class _TemplateIO:
    """A template's inputs, outputs and container args, and the calling task's arguments."""

    def __init__(self, template: dict[str, Any], task: dict[str, Any], cached: bool = False,
                 node: Node | None = None):
        self.t, self.task, self.cached, self.node = template, task, cached, node

    def arg(self, kind: str, port: str, value: str) -> None:
        self.t["container"]["args"] += ["--in", kind, port, value]

    def add_args(self, args: list[str]) -> None:
        self.t["container"]["args"] += args

    def param_in(self, name: str, ref: Ref) -> None:
        self.t.setdefault("inputs", {}).setdefault("parameters", []).append({"name": name})
        self.task.setdefault("arguments", {}).setdefault("parameters", []).append(
            {"name": name, "value": f"{{{{{ref.text}}}}}"})

    def artifact_in(self, name: str, ref: Ref) -> None:
        self.t.setdefault("inputs", {}).setdefault("artifacts", []).append({"name": name, "path": f"{IN_DIR}/{name}"})
        arg = ({"name": name, "fromExpression": ref.expr} if ref.text.startswith("=")
               else {"name": name, "from": f"{{{{{ref.text}}}}}"})
        self.task.setdefault("arguments", {}).setdefault("artifacts", []).append(arg)

    def output(self, kind: str, entry: dict[str, Any]) -> None:
        self.t.setdefault("outputs", {}).setdefault(kind, []).append(entry)
