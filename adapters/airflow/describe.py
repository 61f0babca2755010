"""Compile: the DAG description, everything the loader needs as plain JSON data.

The scheduler parses a DAG file every few seconds, so the work of rendering is done once here:
the lowered plan walked, each unit turned into its tasks (a step a task, an ``il.map``
``<node>.items`` -> ``<node>`` mapped -> ``<node>.collect``, an ``il.when`` block a
short-circuit task before it, a sub-pipeline call a TaskGroup, an ``il.finally_`` step a task
with trigger rule ``all_done``), with each task's trigger rule, upstream task ids, group, retry
and timeout arguments and a pod's kwargs. The loader (``loader.py``) only turns the description
into Airflow objects and imports nothing of interlock's core.

``serial`` (airflow-local's default): every task also waits for the one before it in plan
order with trigger rule ``all_done``, so that ``dag.test()`` (which starts the ready tasks of a
round in no fixed order) runs them in the order the local backend does; each task then decides
from the run state whether its node starts (failure policy, gates).

A task is ``{"id", "kind", "node", "rule", "upstream", "group", "args"}`` plus, by kind:
``pod`` (operator=kubernetes), ``pods`` (a map's items task: return the pods' arguments),
``items`` and ``limit`` (a map's mapped task), ``gate`` (a gate task's gate id). Kinds: step, finally, items, mapped, collect, gate. ``args``: the task's
retry and timeout arguments, times in seconds.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from interlock.core.backend.plan import Block, Call, Chain, FinallyScope, Plan, Step, Unit, lower
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.joins import DEFAULT, RunIf
from interlock.core.model.pipeline_spec import Node, PipelineSpec

from .names import COLLECT, ITEMS, gate_task_id, task_id
from .schedule import schedule_args

ALL_DONE = "all_done"
ONE_BRANCH = "none_failed_min_one_success"  # a reader of il.branch_value: one branch ran, none failed
# Each join rule (run_if=) as the Airflow trigger rule that decides the same (core/model/joins.py).
TRIGGER_RULES = {
    RunIf.NONE_FAILED: "none_failed", RunIf.ALL_SUCCEEDED: "all_success",
    RunIf.ANY_SUCCEEDED: "none_failed_min_one_success", RunIf.ONE_SUCCEEDED: "one_success",
    RunIf.ALL_DONE: ALL_DONE,
}
_KINDS = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "list": "array",
          "dict": "object", "dataclass": "object"}


def describe(spec: PipelineSpec, options: dict[str, Any]) -> dict[str, Any]:
    """The DAG description of ``spec`` compiled with ``options`` (``AirflowOptions`` as a dict)."""
    pods = options.get("operator", "taskflow") == "kubernetes"
    if pods and (not spec.ref or spec.ref.startswith("__main__:")):
        raise PipelineDefinitionError(
            f"pipeline reference {spec.ref!r} cannot be imported inside a step's pod", pipeline=spec.name,
            hint="define the pipeline in an importable module (not a script run as __main__), or "
            "--option operator=taskflow")
    render = _Render(spec, options, pods)
    render.all()
    return {
        "dag": {
            "dag_id": options.get("dag_id") or spec.name,
            **schedule_args(spec, scheduled=bool(options.get("schedule", True))),
            "params": params_schema(spec),
            "tags": ["interlock"],
            "doc_md": f"interlock pipeline `{spec.name}` (compiled by `interlock compile --backend airflow`)",
            "default_args": {"retries": 0},
        },
        "groups": render.groups,
        "tasks": render.tasks,
    }


def params_schema(spec: PipelineSpec) -> dict[str, dict[str, Any]]:
    """Each parameter as the DAG's ``Param``: its default (if any) and JSON schema type."""
    params: dict[str, dict[str, Any]] = {}
    for p in spec.params:
        kind = _KINDS.get(str(p.type.kind))
        d: dict[str, Any] = {"default": p.default} if p.has_default else {}
        if kind:
            d["type"] = [kind, "null"] if p.type.optional else kind
        params[p.name] = d
    return params


def _seconds(kw: dict[str, Any]) -> dict[str, Any]:
    return {k: v.total_seconds() if isinstance(v, timedelta) else v for k, v in kw.items()}


class _Render:
    """One pass over the plan; ``last`` is the task before the next one in plan order."""

    def __init__(self, spec: PipelineSpec, options: dict[str, Any], pods: bool):
        self.spec, self.options, self.pods = spec, options, pods
        self.serial = bool(options.get("serial", False))
        self.plan: Plan = lower(spec)
        self.tasks: list[dict[str, Any]] = []
        self.groups: dict[str, dict[str, Any]] = {}  # group id -> its parent group and tooltip
        self._by_id: dict[str, dict[str, Any]] = {}
        self.entry: dict[str, str] = {}  # node -> the task that starts it (a map: its items task)
        self.exit: dict[str, str] = {}  # node -> the task that ends it (a map: its collect task)
        self.last: str | None = None
        self.group: str | None = None
        self.gates: list[tuple[str, list[str]]] = []  # gate task, the nodes of its block
        self.done: dict[str, str] = {}  # a block's finally step -> its task, once added

    # -- the plan --

    def all(self) -> None:
        self.units(self.plan.units)
        for gate_task, members in self.gates:  # a block's tasks that read nothing inside it start after its gate
            inside = set(members)
            for name in members:
                if not (self.spec.node(name).upstream() & inside):
                    self.edge(gate_task, self.entry[name])
        finals = [b.node for b in self.spec.finally_blocks] + ([self.spec.finally_] if self.spec.finally_ else [])
        body = [self.exit[n.name] for n in self.plan.nodes()]
        self.group = None
        for node in finals:  # after everything in serial order; else after its own block
            if node.name not in self.done:  # a `with il.finally_` block's: at the block's end (units)
                self.finally_task(node, body)
        for block in self.spec.finally_blocks:  # once every task is there
            self._after_block(block, self.done[block.node.name], self.done)

    def finally_task(self, node: Node, body: list[str]) -> None:
        t = self.task("finally", node, ALL_DONE, self._common(node), pod=self._pod(node, ["finally", node.name]))
        block = next((b for b in self.spec.finally_blocks if b.node.name == node.name), None)
        upstream = [self.exit[m] for m in block.members if m in self.exit] if block is not None else body
        for u in upstream:
            self.edge(u, t)
        if block is not None:
            self.done[node.name] = t
        self._follow(t)

    def _after_block(self, block: Any, task: str, done: dict[str, str]) -> None:
        """A ``with il.finally_`` block's finally task ends the block, as Python's ``finally:``: the
        blocks nested in it end before it, and what reads the block from outside it (the outer
        block going on) waits for it; a failed one stops those readers (upstream_failed). An
        il.on_failure step skips when its block did not fail: nothing waits for it."""
        from interlock.core.model.finally_blocks import inner_blocks, is_call_finally, is_handler

        spec = self.spec
        for inner in inner_blocks(spec, block):
            if inner.node.name in done:
                self.edge(done[inner.node.name], task)
        if is_call_finally(spec, block) or is_handler(spec, block.node.name):
            return
        inside = set(block.members)
        for n in self.plan.nodes():
            if n.name not in inside and n.upstream() & inside:
                self.edge(task, self.entry[n.name])

    def units(self, units: tuple[Unit, ...]) -> None:
        for u in units:
            if isinstance(u, Step):
                self.step(u.node)
            elif isinstance(u, Block):
                self.block(u)
            elif isinstance(u, Chain):
                for b in u.blocks:
                    self.block(b)
            elif isinstance(u, Call):
                outer, gid = self.group, task_id(f"{u.call.name}-call").replace(".", "_")
                self.groups[gid] = {"parent": outer, "tooltip": f"sub-pipeline {u.call.pipeline}"}
                self.group = gid
                self.units(u.units)
                self.group = outer
            elif isinstance(u, FinallyScope):  # its finally step ends it (in serial order too)
                self.units(u.units)
                group, self.group = self.group, None
                self.finally_task(u.block.node, [])
                self.group = group

    def block(self, b: Block) -> None:
        gate = self.add({"id": gate_task_id(b.gate.id), "kind": "gate", "gate": b.gate.id, "node": None,
                         "rule": ALL_DONE if self.serial else "all_success", "args": {}})
        for name in sorted(self._condition_nodes(b)):
            self.edge(self.exit[name], gate)
        if self.last is not None:  # beside the serial order, never in it: a closed gate skips only its block
            self.edge(self.last, gate)
        self.gates.append((gate, list(self.plan.nodes_in(b.key))))
        self.units(b.units)

    def step(self, node: Node) -> None:
        if node.map is None:
            first = last = self.task("step", node, self._rule(node), self._common(node),
                                     pod=self._pod(node, ["step", node.name]))
        else:
            first, last = self.map_tasks(node)
        self.entry[node.name], self.exit[node.name] = first, last
        for name in sorted(node.upstream()):  # what it reads and what it runs after=
            if name in self.exit:
                self.edge(self.exit[name], first)
        self._follow(first, last)

    def map_tasks(self, node: Node) -> tuple[str, str]:
        assert node.map is not None
        items = self.task("items", node, self._rule(node), {}, suffix=ITEMS)
        self._by_id[items]["pods"] = self.pods  # its body returns the pods' entry arguments
        limit = node.map.concurrency or None  # max_active_tis_per_dag
        mapped = self.add({"id": task_id(node.name), "kind": "mapped", "node": node.name, "rule": None,
                           "items": items, "limit": limit, "args": self._common(node),
                           "pod": self._pod(node, None)})
        collect = self.task("collect", node, ALL_DONE, {}, suffix=COLLECT)
        self.edge(mapped, collect)
        self.edge(items, collect)  # decided before the items (skipped, not run): collect says so
        return items, collect

    def _follow(self, first: str, last: str | None = None) -> None:
        if self.serial and self.last is not None:
            self.edge(self.last, first)
        self.last = last if last is not None else first

    def _condition_nodes(self, b: Block) -> set[str]:
        from interlock.core.model.conditions import condition_of

        names: set[str] = set()
        for g in self.spec.gate_chain(b.gate.id):
            for ref in condition_of(g).bindings():
                names |= ref.nodes()
        return {n for n in names if n in self.exit}

    # -- the tasks --

    def task(self, kind: str, node: Node, rule: str, args: dict[str, Any], pod: dict[str, Any] | None = None,
             suffix: str = "") -> str:
        return self.add({"id": task_id(node.name + suffix), "kind": kind, "node": node.name, "rule": rule,
                         "args": args, **({"pod": pod} if pod is not None else {})})

    def add(self, t: dict[str, Any]) -> str:
        t.update(upstream=[], group=self.group)
        self.tasks.append(t)
        self._by_id[t["id"]] = t
        return str(t["id"])

    def edge(self, upstream: str, downstream: str) -> None:
        ups = self._by_id[downstream]["upstream"]
        if upstream not in ups:
            ups.append(upstream)

    def _rule(self, node: Node) -> str:
        if self.serial:
            return ALL_DONE  # each task decides itself from the run state
        if node.run_if is not None:  # a join rule: Airflow's own trigger rule (a fallback's first steps: all_done)
            return TRIGGER_RULES[RunIf(node.run_if)]
        if self._after_attempt(node):  # il.attempt(): the worker decides from how the attempt ended
            return ALL_DONE
        if any(b.kind == "one_of" for _, b in node.inputs):
            return ONE_BRANCH
        # interlock's default rule, none_failed: a skipped upstream (a closed block, il.Skip) does
        # not skip the task; the worker skips it when it reads a value that was never made.
        return TRIGGER_RULES[DEFAULT]

    def _after_attempt(self, node: Node) -> bool:
        """A step of an il.attempt() block (it does not start after the block's failure, which
        Airflow would call upstream_failed), or one reading il.branch_value over an attempt and its
        fallback (one of them did not run)."""
        from interlock.core.model.attempts import attempt_of, handled

        ok = handled(self.spec)
        return attempt_of(self.spec, node.name) is not None or any(
            b.kind == "one_of" and b.nodes() & ok for _, b in node.inputs)

    def _common(self, node: Node) -> dict[str, Any]:
        """The retry and timeout arguments of a node's task, in seconds."""
        step = self.spec.step_of(node)
        kw: dict[str, Any] = {"retries": 0}  # retries="shim": the shim retries every kind in the task
        if self.options.get("retries", "airflow") == "airflow":
            from .retries import retry_settings

            # A pod's exit code does not say the failure's kind: the shim's stop marker ends a
            # retry it would not grant in seconds; a TaskFlow task tells ShimRetryPolicy the kind.
            kw.update(_seconds(retry_settings(step, policy=False)))
            if not self.pods and kw["retries"]:  # without retries Airflow never asks a policy
                kw["retry_policy"] = True
        if step.timeout_s is not None and self.pods:
            # The pod runs the shim for one attempt at a time (pod.py): Airflow's own timeout is
            # the backstop of the shim's timer. In a TaskFlow task the shim retries in the worker,
            # so the attempts and their backoff would count against one execution_timeout.
            kw["execution_timeout"] = step.timeout_s + 60
        return kw

    def _pod(self, node: Node, args: list[str] | None) -> dict[str, Any] | None:
        if not self.pods:
            return None
        from .pod import pod_spec

        return pod_spec(self.spec, node, self.options, args)
