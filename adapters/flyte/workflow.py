"""The workflow wiring the tasks, with ``il.when`` blocks as Flyte conditionals.

flytekit compiles a workflow by calling a Python function with promises, and executes it
locally by calling the same function with values; so the workflow body here is a
synthesised function that walks the spec. A gate becomes
``conditional(gate).if_(flag.is_true()).then(...).else_().then(noop())``; a block of
several steps (or a nested gate) becomes a sub-workflow, one step is called directly.
"""

from __future__ import annotations

import heapq
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flytekit import conditional
from flytekit.core.promise import VoidPromise
from flytekit.core.workflow import PythonFunctionWorkflow, WorkflowMetadata

from interlock.core.errors import PipelineDefinitionError
from interlock.core.fanout import list_of
from interlock.core.graph import binding_type
from interlock.core.spec import Binding, BindingKind, PipelineSpec

from . import fanout
from .tasks import TaskOptions, build_noop, build_task, py_ident
from .types import outputs_type, python_type, to_flyte


@dataclass
class Entities:
    """Everything one pipeline compiles to; ``workflow`` is registered under ``spec.name``."""

    spec: PipelineSpec
    tasks: dict[str, Any]  # node -> task
    workflow: PythonFunctionWorkflow
    subworkflows: dict[str, PythonFunctionWorkflow]  # gate id -> sub-workflow
    noop: Any | None


def _key(b: Binding) -> str:
    if b.kind is BindingKind.PARAM:
        return b.param or ""  # workflow inputs keep the pipeline's parameter names
    return py_ident("__".join([b.node or "", b.port or "", *b.field]))


class _Builder:
    def __init__(self, spec: PipelineSpec, options: TaskOptions):
        self.spec = spec
        self.options = options
        self.tasks = {n.name: build_task(spec, n.name, options) for n in spec.nodes}
        for n in spec.nodes:
            if n.map is not None:  # il.map: an array node over the per-item task
                self.tasks[n.name] = fanout.map_task(spec, n.name, self.tasks[n.name])
        self.subworkflows: dict[str, PythonFunctionWorkflow] = {}
        self.noop = build_noop(spec.name, options) if spec.gates else None
        for _, b in spec.outputs:
            if b.kind is BindingKind.OUTPUT and spec.node(b.node or "").gate:
                raise PipelineDefinitionError(
                    f"pipeline output {b.describe()} comes from inside an il.when block; a Flyte conditional "
                    "with a no-op else branch has no value to return there",
                    pipeline=spec.name, hint="return it from a step outside the block",
                )
        for g in spec.gates:
            if g.condition.field:
                raise PipelineDefinitionError(
                    f"il.when({g.condition.describe()}): a Flyte conditional compares a node output, "
                    "not a field of a dataclass output",
                    pipeline=spec.name,
                    hint="return the flag as its own output (a bool, or a NamedTuple field such as decision.promote)",
                )

    # -- scopes ------------------------------------------------------------------------
    def _unit(self, node_gate: str | None, scope: str | None) -> str | None:
        """Which member of ``scope`` a node with ``node_gate`` belongs to (a node or a gate id)."""
        chain = [g.id for g in self.spec.gate_chain(node_gate)]
        if scope is None:
            return chain[0] if chain else ""
        if scope not in chain:
            return None
        i = chain.index(scope)
        return chain[i + 1] if i + 1 < len(chain) else ""

    def nodes_in(self, gate: str) -> list[str]:
        return [n.name for n in self.spec.nodes if gate in [g.id for g in self.spec.gate_chain(n.gate)]]

    def external_bindings(self, gate: str) -> dict[str, Binding]:
        """What a gate's block reads from outside it: its sub-workflow inputs."""
        inside = set(self.nodes_in(gate))
        found: dict[str, Binding] = {}
        for name in inside:
            for _, top in self.spec.node(name).inputs:
                for b in (top, *top.items):  # a fan-in list reads each of its items
                    if b.kind is BindingKind.PARAM or (b.kind is BindingKind.OUTPUT and b.node not in inside):
                        found[_key(b)] = b
        for g in self.spec.gates:
            if g.parent and gate in [c.id for c in self.spec.gate_chain(g.parent)]:
                c = g.condition
                if c.node not in inside:
                    found[_key(c)] = c
        return dict(sorted(found.items()))

    # -- emitting --------------------------------------------------------------------------
    def emit_scope(self, gate: str | None, values: dict[str, Any]) -> None:
        """Call the scope's members in order; ``values`` maps binding keys to promises/values."""
        ordered = [n.name for n in self.spec.nodes]
        handles: dict[str, Any] = {}
        for nodes_or_gate in self._ordered_units(gate, ordered):
            kind, name = nodes_or_gate
            if kind == "node":
                self.emit_node(name, values, handles)
            else:
                self.emit_gate(name, values)

    def _ordered_units(self, gate: str | None, ordered: list[str]) -> list[tuple[str, str]]:
        """Members ordered so that every unit comes after all it reads from (Kahn, stable)."""
        units: list[tuple[str, str]] = []
        member_of: dict[str, tuple[str, str]] = {}
        seen: set[tuple[str, str]] = set()
        for n in ordered:
            member = self._unit(self.spec.node(n).gate, gate)
            if member is None:
                continue
            unit = ("node", n) if member == "" else ("gate", member)
            member_of[n] = unit
            if unit not in seen:
                seen.add(unit)
                units.append(unit)
        deps: dict[tuple[str, str], set[tuple[str, str]]] = {u: set() for u in units}
        for u in units:
            names = [u[1]] if u[0] == "node" else self.nodes_in(u[1])
            ups: set[str] = set()
            for n in names:
                ups |= self.spec.node(n).upstream()
            if u[0] == "gate":  # the block's own condition and those of blocks nested in it
                ups |= {g.condition.node or "" for g in self.spec.gates if g.id in self.nodes_gates(u[1])}
            deps[u] = {member_of[x] for x in ups if x in member_of and member_of[x] != u}
        # Kahn's algorithm; among the ready units the earliest in `ordered` goes first.
        index = {u: i for i, u in enumerate(units)}
        waiting = {u: len(d) for u, d in deps.items()}
        readers: dict[tuple[str, str], list[tuple[str, str]]] = {u: [] for u in units}
        for u, d in deps.items():
            for up in d:
                readers[up].append(u)
        ready = [index[u] for u in units if not waiting[u]]
        heapq.heapify(ready)
        done: list[tuple[str, str]] = []
        while ready:
            u = units[heapq.heappop(ready)]
            done.append(u)
            for r in readers[u]:
                waiting[r] -= 1
                if not waiting[r]:
                    heapq.heappush(ready, index[r])
        if len(done) < len(units):
            raise PipelineDefinitionError("il.when blocks depend on each other in a cycle", pipeline=self.spec.name)
        return done

    def nodes_gates(self, gate: str) -> set[str]:
        return {g.id for g in self.spec.gates if gate in [c.id for c in self.spec.gate_chain(g.id)]}

    def value_of(self, b: Binding, values: dict[str, Any], node_outputs: dict[str, Any]) -> Any:
        key = _key(b)
        if key in values:  # a workflow input: a parameter, or a value passed into a sub-workflow
            return values[key]
        if b.kind is BindingKind.OUTPUT:
            out = node_outputs[b.node or ""]
            v = out if not isinstance(out, dict) else out[b.port or ""]
            for f in b.field:
                v = getattr(v, f)
            return v
        if b.kind is BindingKind.LIST:  # fan-in: flytekit binds a list of promises itself
            return [self.value_of(item, values, node_outputs) for item in b.items]
        return b.value

    def emit_node(self, name: str, values: dict[str, Any], handles: dict[str, Any]) -> None:
        node = self.spec.node(name)
        step = self.spec.step_of(node)
        kwargs = {}
        for port, b in node.inputs:
            v = self.value_of(b, values, values.setdefault("__outputs__", {}))
            t = step.input(port).type
            if node.map is not None and port == node.map.item:
                t = list_of(t)
            if b.kind is BindingKind.CONST:
                v = to_flyte(v, t)  # dataclass from its JSON form, untyped list/dict as JSON text
            kwargs[port] = v
        result = self.tasks[name](**kwargs)
        if hasattr(result, "with_overrides") and not _is_local(result):
            result.with_overrides(node_name=name)
        for up in node.after:
            if up in handles and hasattr(handles[up], "runs_before") and not _is_local(result):
                handles[up] >> result
        handles[name] = result
        ports = [p.name for p in step.outputs]
        if len(ports) == 1 and ports[0] == "o0":
            values["__outputs__"][name] = {"o0": result}
        elif ports:
            values["__outputs__"][name] = {p: getattr(result, p) for p in ports}

    def emit_gate(self, gate_id: str, values: dict[str, Any]) -> None:
        g = self.spec.gate(gate_id)
        flag = self.value_of(g.condition, values, values.setdefault("__outputs__", {}))
        sub = self.subworkflow(gate_id)
        ext = self.external_bindings(gate_id)
        kwargs = {k: self.value_of(b, values, values["__outputs__"]) for k, b in ext.items()}
        taken = _local_bool(flag)
        case = conditional(gate_id).if_(_is_true(flag))
        # flytekit local runs a nested conditional's false branch when the enclosing one was
        # taken (its context keeps BRANCH_ACTIVE): do not even call a branch we know is closed.
        branch = case.then(sub(**kwargs) if taken is not False else VoidPromise(sub.name))
        branch.else_().then(self.noop())  # type: ignore[misc]
        _name_branch_node(gate_id)

    def subworkflow(self, gate_id: str) -> PythonFunctionWorkflow:
        if gate_id not in self.subworkflows:
            ext = self.external_bindings(gate_id)
            types = {k: python_type(_type_of(self.spec, b)) for k, b in ext.items()}

            def body(**kwargs: Any) -> None:
                values = dict(kwargs)
                values["__outputs__"] = {}
                self.emit_scope(gate_id, values)

            fn = _function(f"{self.spec.name}_{gate_id}", types, {}, None, body)
            wf = PythonFunctionWorkflow(fn, metadata=WorkflowMetadata(on_failure=_fail_immediately()),
                                        default_metadata=_defaults())
            wf._name = f"{self.spec.name}.{gate_id}"
            self.subworkflows[gate_id] = wf
        return self.subworkflows[gate_id]

    def workflow(self) -> PythonFunctionWorkflow:
        spec = self.spec
        types = {p.name: python_type(p.type) for p in spec.params}
        defaults = {
            p.name: to_flyte(p.default, p.type) for p in spec.params if p.has_default
        }
        out_ports = tuple(_Port(k, t) for k, t in spec.output_types)
        ret = outputs_type(out_ports, f"{py_ident(spec.name)}_outputs")

        def body(**kwargs: Any) -> Any:
            values = dict(kwargs)
            values["__outputs__"] = {}
            self.emit_scope(None, values)
            outs = [self.value_of(b, values, values["__outputs__"]) for _, b in spec.outputs]
            if not outs:
                return None
            return outs[0] if len(outs) == 1 and spec.outputs[0][0] == "o0" else ret(*outs)

        fn = _function(py_ident(spec.name), types, defaults, ret, body)
        wf = PythonFunctionWorkflow(fn, metadata=WorkflowMetadata(on_failure=_fail_immediately()),
                                    default_metadata=_defaults())
        wf._name = spec.name
        return wf


@dataclass(frozen=True)
class _Port:
    name: str
    type: Any


def _type_of(spec: PipelineSpec, b: Binding) -> Any:
    t = binding_type(spec, b)
    if t is None:
        raise PipelineDefinitionError(f"cannot type {b.describe()}", pipeline=spec.name)
    return t


def _name_branch_node(gate_id: str) -> None:
    """Give the conditional's node the gate's id (flytekit would call it n<k>)."""
    from flytekit.core.condition import BranchNode
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.utils import _dnsify

    state = FlyteContextManager.current_context().compilation_state
    if state is not None and state.nodes and isinstance(getattr(state.nodes[-1], "flyte_entity", None), BranchNode):
        state.nodes[-1]._id = _dnsify(gate_id)


def _is_local(result: Any) -> bool:
    from flytekit.core.promise import Promise

    return isinstance(result, Promise) and result.is_ready


def _local_bool(flag: Any) -> bool | None:
    """The flag's value in local execution; None while compiling (the value is not known yet)."""
    if not _is_local(flag):
        return None
    return bool(flag.val.scalar.primitive.boolean)


def gate_values(spec: PipelineSpec, returned: dict[str, Any]) -> dict[str, bool]:
    """Each il.when condition whose node flytekit ran locally, from what the node returned."""
    values: dict[str, bool] = {}
    for g in spec.gates:
        b = g.condition
        if b.kind != "output" or b.node not in returned:
            continue
        out = returned[b.node or ""]
        ports = [p.name for p in spec.step_of(b.node or "").outputs]
        try:
            flag = out if len(ports) == 1 and ports[0] == "o0" else getattr(out, b.port or "")
            taken = _local_bool(flag)
        except (AttributeError, TypeError):  # not a local boolean literal: leave the gate undecided
            continue
        if taken is not None:
            values[g.id] = taken
    return values


def _is_true(flag: Any) -> Any:
    return flag.is_true() if hasattr(flag, "is_true") else flag


def _fail_immediately() -> Any:
    from flytekit.core.workflow import WorkflowFailurePolicy

    return WorkflowFailurePolicy.FAIL_IMMEDIATELY


def _defaults() -> Any:
    from flytekit.core.workflow import WorkflowMetadataDefaults

    return WorkflowMetadataDefaults(interruptible=False)


def _function(name: str, types: dict[str, Any], defaults: dict[str, Any], ret: Any,
              body: Callable[..., Any]) -> Callable[..., Any]:
    def fn(**kwargs: Any) -> Any:
        return body(**kwargs)

    params = [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=t,
                          **({"default": defaults[k]} if k in defaults else {}))
        for k, t in types.items()
    ]
    fn.__signature__ = inspect.Signature(params, return_annotation=ret)  # type: ignore[attr-defined]
    fn.__annotations__ = {**types, "return": ret}
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    return fn


def build_entities(spec: PipelineSpec, options: TaskOptions | None = None) -> Entities:
    b = _Builder(spec, options or TaskOptions())
    wf = b.workflow()
    return Entities(spec, b.tasks, wf, b.subworkflows, b.noop)
