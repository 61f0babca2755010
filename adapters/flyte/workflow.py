"""The workflow wiring the tasks, with ``il.when`` blocks as Flyte conditionals.

flytekit compiles a workflow by calling a Python function with promises, and executes it
locally by calling the same function with values; so the workflow body here is a
synthesised function that walks the lowered plan (core/backend/plan.py). A gate becomes
``conditional(gate).if_(flag.is_true()).then(...).else_().then(noop())``; a block of
several steps (or a nested gate) becomes a sub-workflow, one step is called directly.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple

from flytekit import conditional
from flytekit.core.docstring import Docstring
from flytekit.core.promise import Promise, VoidPromise
from flytekit.core.workflow import PythonFunctionWorkflow, WorkflowMetadata

from interlock.core.backend.failure_scope import Downstream
from interlock.core.backend.plan import SUB, Block, Call, Chain, FinallyScope, Step, lower
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.chains import own_condition
from interlock.core.model.conditions import COMPARISONS, Cond, Op, condition_of
from interlock.core.model.failure_policy import CONTINUE
from interlock.core.model.fanout import list_of
from interlock.core.model.graph import binding_type
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.submaps import ITEM, mapped_calls

from . import fanout, subworkflow
from .tasks import TaskOptions, build_noop, build_task, py_ident
from .types import outputs_type, python_type, to_flyte


@dataclass
class Entities:
    """Everything one pipeline compiles to; ``workflow`` is registered under ``spec.name``."""

    spec: PipelineSpec
    tasks: dict[str, Any]  # node -> task
    workflow: PythonFunctionWorkflow
    subworkflows: dict[str, PythonFunctionWorkflow]  # scope key (core/backend/plan.py) -> sub-workflow
    noop: Any | None
    finally_task: Any | None = None  # il.finally_: the failure node and the success path's last node
    plan: Any = None  # the lowered plan the workflow renders (core/backend/plan.py)


def binding_key(b: Binding) -> str:
    if b.kind is BindingKind.PARAM:
        if ITEM in (b.param or ""):  # a mapped call's item parameter, "trial[].lr": an identifier (submap.py)
            return py_ident(b.param or "")
        return b.param or ""  # workflow inputs keep the pipeline's parameter names
    if b.kind is BindingKind.ONE_OF:  # an option may be a nested chain's value
        return py_ident("__".join(["oneof", *(binding_key(o) for o in b.options)]))
    return py_ident("__".join([b.node or "", b.port or "", *b.field]))


class _NodePlan(NamedTuple):
    """What emitting a node reads from the spec: the node, its inputs (port, binding, the
    binding's key among the workflow's values, the port's type) and its output ports."""

    node: Node
    inputs: tuple[tuple[str, Binding, str, Any], ...]
    ports: tuple[str, ...]


class Builder:
    def __init__(self, spec: PipelineSpec, options: TaskOptions):
        self.spec = spec
        self.options = options
        self._in_maps = frozenset(x for c in mapped_calls(spec) for x in c.nodes)
        self.tasks = {n.name: build_task(spec, n.name, options) for n in spec.nodes}
        for n in spec.nodes:
            if n.map is not None:  # il.map: an array node over the per-item task
                self.tasks[n.name] = fanout.map_task(spec, n.name, self.tasks[n.name])
        self.subworkflows: dict[str, PythonFunctionWorkflow] = {}
        self._plans: dict[str, _NodePlan] = {}  # node -> what emit_node looks up, once per workflow
        self.noop = build_noop(spec.name, options) if spec.gates else None
        self.finally_task = None
        if spec.finally_ is not None:
            from .finally_node import build_finally_task

            self.finally_task = build_finally_task(spec, options)
        for _, b in spec.outputs:
            if b.kind is BindingKind.OUTPUT and spec.node(b.node or "").gate:
                raise PipelineDefinitionError(
                    f"pipeline output {b.describe()} comes from inside an il.when block; a Flyte conditional "
                    "with a no-op else branch has no value to return there",
                    pipeline=spec.name, hint="return it from a step outside the block",
                )
        # The scopes to render (core/backend/plan.py); il.finally_ around a block: a sub-workflow
        # (finally_blocks.py), its key "<step>-block" names it.
        self.plan = lower(spec)
        finals = sorted((s for s in self.plan.scopes.values() if isinstance(s, FinallyScope)),
                        key=lambda s: spec.finally_blocks.index(s.block))
        self.blocks = {s.key: s.block for s in finals}
        # Built here, outside any workflow compilation (a task made while a workflow compiles takes
        # that workflow as its resolver), with the very types its sub-workflow declares.
        self.block_types = {gid: {k: python_type(type_of_binding(self.spec, b))
                                  for k, b in self.external_bindings(gid).items()} for gid in self.blocks}
        self.block_tasks: dict[str, Any] = {gid: self.block_task(gid, t) for gid, t in self.block_types.items()}
        self.call_finally_tasks = subworkflow.finally_tasks(self.plan, options)  # il.finally_ in a sub-pipeline
        if spec.subs:  # il.map over a sub-pipeline: a dynamic task per mapped call (submap.py)
            from . import submap

            submap.check(spec)
            for c in submap.mapped_calls(spec):
                self.tasks[c.name] = submap.build_dynamic(self, self.plan.call(c.name))
        for g in spec.gates:
            for c in condition_of(g).bindings():
                if not c.field:
                    continue
                raise PipelineDefinitionError(
                    f"il.when({c.describe()}): a Flyte conditional compares a node output, "
                    "not a field of a dataclass output",
                    pipeline=spec.name,
                    hint="return the flag as its own output (a bool, or a NamedTuple field such as decision.promote)",
                )

    # -- scopes ------------------------------------------------------------------------
    # A scope is a key of the plan: an il.when block, a sub-pipeline call or an il.finally_ block.
    def nodes_in(self, key: str) -> list[str]:
        return list(self.plan.nodes_in(key))

    def external_bindings(self, gate: str) -> dict[str, Binding]:
        """What a gate's block reads from outside it: its sub-workflow inputs."""
        inside = set(self.nodes_in(gate))
        found: dict[str, Binding] = {}
        for name in inside:
            for _, top in self.spec.node(name).inputs:
                for b in (top, *top.items):  # a fan-in list reads each of its items
                    if b.kind is BindingKind.PARAM or (b.kind is BindingKind.OUTPUT and b.node not in inside):
                        found[binding_key(b)] = b
                    elif b.kind is BindingKind.ONE_OF and not set(b.nodes()) & inside:  # a chain's value from outside
                        found[binding_key(b)] = b
        for g in (self.spec.gate(x) for x in self.plan.gates_in(gate) if x != gate):  # blocks nested in it
            for c in condition_of(g).bindings():
                if c.node not in inside:
                    found[binding_key(c)] = c
        # What the finally steps of the il.finally_ blocks inside it read (its own, if it is one;
        # a sub-pipeline call's within it): parameters.
        for block in self.spec.finally_blocks:
            if gate in self.blocks and self.blocks[gate] is block or set(block.members) <= inside:
                for _, b in block.node.inputs:
                    if b.kind is BindingKind.PARAM:
                        found[binding_key(b)] = b
        # A mapped call inside: its dynamic hands its body the item; the list it maps over comes in (submap.py).
        within = {c.name: c for c in mapped_calls(self.spec) if set(c.nodes) <= inside}
        for k, b in list(found.items()):
            if b.kind is BindingKind.PARAM and (b.param or "").rpartition(ITEM)[0] in within:
                del found[k]
        for c in within.values():
            assert c.map is not None
            for p in c.map.ports:
                b = dict(c.inputs)[p]
                if b.kind is BindingKind.PARAM or (b.kind is BindingKind.OUTPUT and b.node not in inside):
                    found[binding_key(b)] = b
        return dict(sorted(found.items()))

    # -- emitting --------------------------------------------------------------------------
    def emit_scope(self, key: str | None, values: dict[str, Any]) -> None:
        """Call the scope's units in plan order; ``values`` maps binding keys to promises/values."""
        handles: dict[str, Any] = {}
        units = self.plan.units if key is None else self.plan.scope(key).units
        going = _CONTINUING.get()
        if going is None or not _local_execution():
            for u in units:
                self.emit_unit(u, values, handles)
            return
        # failure_policy="continue" on flyte-local: flytekit's local execution stops at the first
        # failure whatever the workflow's policy, so the body goes on with the units that do not
        # depend on it (core/backend/failure_scope.py), and raises the first failure at the end:
        # the scope fails as a whole, its failure node (il.finally_) runs, as on a cluster.
        first: Exception | None = None
        for u in units:
            if not going.downstream.unit_can_start(u):
                going.downstream.fail_unit(u, set())
                continue
            try:
                self.emit_unit(u, values, handles)
            except Exception as exc:  # noqa: BLE001 - a task's failure: its dependents wait, the rest go on
                first = first or exc
                going.downstream.fail_unit(u, set(going.returned))
        if first is not None:
            raise first

    def emit_unit(self, u: Any, values: dict[str, Any], handles: dict[str, Any]) -> None:
        from .finally_blocks import emit_block

        if isinstance(u, Step):
            self.emit_node(u.key, values, handles)
        elif isinstance(u, Call) and u.call.map is not None:  # il.map over a sub-pipeline
            from .submap import emit_map

            emit_map(self, u, values, handles)
        elif isinstance(u, Call):
            subworkflow.emit_sub(self, u, values, handles)
        elif isinstance(u, Chain):  # il.when/il.elif_/il.otherwise
            self.emit_chain(u, values)
        elif isinstance(u, Block):
            self.emit_gate(u.key, values)
        else:
            emit_block(self, u, values)

    def value_of(self, b: Binding, values: dict[str, Any], node_outputs: dict[str, Any], key: str | None = None) -> Any:
        key = binding_key(b) if key is None else key  # emit_node passes the key it planned
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

    def _plan(self, name: str) -> _NodePlan:
        node = self.spec.node(name)
        step = self.spec.step_of(node)
        inputs = []
        for port, b in node.inputs:
            t = step.input(port).type
            if node.map is not None and port in node.map.ports:
                t = list_of(t)
            inputs.append((port, b, binding_key(b), t))
        if node.map is not None:
            # An array node's bound inputs are all given (flytekit applies no default to them):
            # an input the map leaves at its default gets the default, as the shim would.
            bound = dict(node.inputs)
            for p in step.inputs:
                if p.name not in bound and p.has_default:
                    c = Binding.of_const(p.default)
                    inputs.append((p.name, c, binding_key(c), p.type))
        plan = self._plans[name] = _NodePlan(node, tuple(inputs), tuple(p.name for p in step.outputs))
        return plan

    def emit_node(self, name: str, values: dict[str, Any], handles: dict[str, Any]) -> None:
        # The workflow body runs at every flyte-local run (flytekit calls it): the lookups a
        # node needs are made once per workflow, not once per node per run.
        node, inputs, ports = self._plans.get(name) or self._plan(name)
        outputs = values.setdefault("__outputs__", {})
        kwargs = {}
        for port, b, key, t in inputs:
            v = self.value_of(b, values, outputs, key)
            if b.kind is BindingKind.CONST:
                v = to_flyte(v, t)  # dataclass from its JSON form, untyped list/dict as JSON text
            kwargs[port] = v
        if node.name in self._in_maps:  # a step of a mapped sub-pipeline's body: the item's index (submap.py)
            from .submap import CALL_INDEX, CALL_INDEX_ARG

            kwargs[CALL_INDEX_ARG] = values[CALL_INDEX]
        result = self.tasks[name](**kwargs)
        if hasattr(result, "with_overrides") and not _is_local(result):
            result.with_overrides(node_name=name)
        for up in node.after:
            before, this = subworkflow._handle(handles.get(up)), subworkflow._handle(result)
            if before is not None and this is not None:
                before >> this
        handles[name] = result
        if len(ports) == 1 and ports[0] == "o0":
            outputs[name] = {"o0": result}
        elif ports:
            outputs[name] = {p: getattr(result, p) for p in ports}

    def emit_gate(self, gate_id: str, values: dict[str, Any]) -> None:
        g = self.spec.gate(gate_id)
        outputs = values.setdefault("__outputs__", {})
        cond = condition_of(g)
        operands = {b: self.value_of(b, values, outputs) for b in cond.bindings()}
        sub = self.subworkflow(gate_id)
        ext = self.external_bindings(gate_id)
        kwargs = {k: self.value_of(b, values, values["__outputs__"]) for k, b in ext.items()}
        kwargs |= self.item_index(values)
        taken = _local_taken(cond, operands)
        saved = _branch_mode()
        case = conditional(gate_id).if_(flyte_expression(cond, operands))
        # flytekit local runs a nested conditional's false branch when the enclosing one was
        # taken (its context keeps BRANCH_ACTIVE): do not even call a branch we know is closed.
        branch = case.then(sub(**kwargs) if taken is not False else VoidPromise(sub.name))
        branch.else_().then(self.noop())  # type: ignore[misc]
        _restore_branch_mode(saved)
        _name_branch_node(gate_id)

    # -- il.when/il.elif_/il.otherwise chains --------------------------------------------------
    def branch_returns(self, gate_id: str) -> list[Binding]:
        """What a chain member's sub-workflow returns: its option of each branch value."""
        chain = self.plan.chain_of(gate_id)
        if chain is None:
            return []
        i = [b.key for b in chain.blocks].index(gate_id)
        return [b.options[i] for b in chain.values]

    def emit_chain(self, unit: Chain, values: dict[str, Any]) -> None:
        """One Flyte conditional: if_(...).then(...).elif_(...).then(...).else_().then(...)."""
        from flytekit.core.promise import create_task_output

        head = unit.key
        chain = [b.gate for b in unit.blocks]
        outputs = values.setdefault("__outputs__", {})
        chain_vals = unit.values
        reads = {b: self.value_of(b, values, outputs) for g in chain for b in condition_of(g).bindings()}
        local = bool(reads) and all(_is_local(p) for p in reads.values())
        taken = None
        if local:  # which block runs: flytekit local would also run closed branches of a nested chain
            literal = {b: _literal_value(p) for b, p in reads.items()}
            taken = next((g.id for g in chain
                          if condition_of(g).evaluate(lambda b: literal[b] if b in literal else b.value)), None)
        saved = _branch_mode()
        section: Any = conditional(head)
        for i, g in enumerate(chain):
            own = own_condition(g)
            expr = flyte_expression(own, {b: reads[b] for b in own.bindings()}) if own is not None else None
            case = section.if_(expr) if i == 0 else (section.else_() if own is None else section.elif_(expr))
            sub = self.subworkflow(g.id)
            if local and taken != g.id:
                out: Any = VoidPromise(sub.name) if not chain_vals else create_task_output(
                    [Promise(var=f"v{k}", val=_void()) for k in range(len(chain_vals))])
            else:
                kwargs = {k: self.value_of(b, values, outputs) for k, b in self.external_bindings(g.id).items()}
                out = sub(**kwargs, **self.item_index(values))
            section = case.then(out)
        if own_condition(chain[-1]) is not None:  # no il.otherwise: a no-op else, as for one block
            section = section.else_().then(self.noop())  # type: ignore[misc]
        _restore_branch_mode(saved)
        _name_branch_node(head)
        for k, b in enumerate(chain_vals):
            values[binding_key(b)] = section if len(chain_vals) == 1 else getattr(section, f"v{k}")

    def subworkflow(self, gate_id: str) -> PythonFunctionWorkflow:
        scope = self.plan.scope(gate_id)
        if gate_id not in self.subworkflows and isinstance(scope, Call):  # a sub-pipeline call
            self.subworkflows[gate_id] = subworkflow.make(self, scope)
        if gate_id not in self.subworkflows:
            ext = self.external_bindings(gate_id)
            types = (self.block_types.get(gate_id)
                     or {k: python_type(type_of_binding(self.spec, b)) for k, b in ext.items()})
            types = {**types, **self.index_input(gate_id)}

            returns = self.branch_returns(gate_id)
            if gate_id in self.blocks:  # what is read after the block: its sub-workflow's outputs
                from .finally_blocks import block_returns

                returns = block_returns(self, gate_id)
            ret = outputs_type(tuple(OutputPort(f"v{i}", type_of_binding(self.spec, b)) for i, b in enumerate(returns)),
                               py_ident(f"{self.spec.name}_{gate_id}_values"))

            def body(**kwargs: Any) -> Any:
                values = dict(kwargs)
                values["__outputs__"] = {}
                self.take_index(values)
                self.emit_scope(gate_id, values)
                if gate_id in self.blocks:  # the success path's last node: the block's finally step
                    from .finally_node import call_last

                    call_last(self.blocks[gate_id].node, self.block_task(gate_id, types), kwargs, self.spec)
                if not returns:
                    return None
                outs = [self.value_of(b, values, values["__outputs__"]) for b in returns]
                return ret(*outs)

            fn = workflow_function(f"{self.spec.name}_{gate_id}", types, {}, ret, body)
            wf = PythonFunctionWorkflow(fn, metadata=WorkflowMetadata(on_failure=failure_policy(self.spec)),
                                        default_metadata=workflow_defaults(),
                                        on_failure=self.block_task(gate_id, types) if gate_id in self.blocks else None)
            wf._name = f"{self.spec.name}.{gate_id}"
            self.subworkflows[gate_id] = wf
        return self.subworkflows[gate_id]

    # -- the item index of a mapped call, through the scopes of its body (submap.py) ---------------
    def index_input(self, key: str) -> dict[str, Any]:
        """A scope inside a mapped call's body takes the item's index as one more input."""
        from .submap import CALL_INDEX_ARG

        nodes = set(self.nodes_in(key))
        inside = nodes and any(nodes <= set(c.nodes) and SUB + c.name != key for c in mapped_calls(self.spec))
        return {CALL_INDEX_ARG: int} if inside else {}

    @staticmethod
    def item_index(values: dict[str, Any]) -> dict[str, Any]:
        """What a call of a nested scope's sub-workflow passes on of the item's index, if any."""
        from .submap import CALL_INDEX, CALL_INDEX_ARG

        return {CALL_INDEX_ARG: values[CALL_INDEX]} if CALL_INDEX in values else {}

    @staticmethod
    def take_index(values: dict[str, Any]) -> None:
        """In a nested scope's body: the item's index among its values, where the body's tasks find it."""
        from .submap import CALL_INDEX, CALL_INDEX_ARG

        if CALL_INDEX_ARG in values:
            values[CALL_INDEX] = values.pop(CALL_INDEX_ARG)

    def block_task(self, gate_id: str, types: dict[str, Any]) -> Any:
        """The finally task of an il.finally_ block: its sub-workflow's failure node and last node."""
        if gate_id not in getattr(self, "block_tasks", {}):
            from .finally_node import build_finally_task

            return build_finally_task(self.spec, self.options, self.blocks[gate_id].node, types)
        return self.block_tasks[gate_id]

    def workflow(self) -> PythonFunctionWorkflow:
        spec = self.spec
        types = {p.name: python_type(p.type) for p in spec.params}
        defaults = {
            p.name: to_flyte(p.default, p.type) for p in spec.params if p.has_default
        }
        out_ports = tuple(OutputPort(k, t) for k, t in spec.output_types)
        ret = outputs_type(out_ports, f"{py_ident(spec.name)}_outputs")

        def body(**kwargs: Any) -> Any:
            values = dict(kwargs)
            values["__outputs__"] = {}
            self.emit_scope(None, values)
            if self.finally_task is not None:
                from .finally_node import call_last

                call_last(spec.finally_, self.finally_task, {p.name: values[p.name] for p in spec.params}, spec)
            outs = [self.value_of(b, values, values["__outputs__"]) for _, b in spec.outputs]
            if not outs:
                return None
            return outs[0] if len(outs) == 1 and spec.outputs[0][0] == "o0" else ret(*outs)

        fn = workflow_function(py_ident(spec.name), types, defaults, ret, body)
        fn.__doc__ = spec.doc or None
        # As @workflow does: the docstring becomes the workflow's description in the Flyte console.
        wf = PythonFunctionWorkflow(fn, metadata=WorkflowMetadata(on_failure=failure_policy(self.spec)),
                                    default_metadata=workflow_defaults(), docstring=Docstring(callable_=fn),
                                    on_failure=self.finally_task)
        wf._name = spec.name
        return wf


@dataclass(frozen=True)
class OutputPort:
    name: str
    type: Any


def type_of_binding(spec: PipelineSpec, b: Binding) -> Any:
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


def _branch_mode() -> tuple[Any, Any] | None:
    """The local execution state and its branch mode, before a conditional runs.

    Inside a taken branch, flytekit hands a nested conditional the enclosing execution state
    itself (not a copy), and ending that conditional sets it to BRANCH_SKIPPED: every later
    task and conditional of the enclosing block would then be skipped silently.
    """
    from flytekit.core.context_manager import FlyteContextManager

    state = FlyteContextManager.current_context().execution_state
    if state is None or not state.is_local_execution():
        return None
    return state, state.branch_eval_mode


def _restore_branch_mode(saved: tuple[Any, Any] | None) -> None:
    if saved is not None:
        state, mode = saved
        object.__setattr__(state, "branch_eval_mode", mode)  # ExecutionState is frozen; flytekit sets it so too


def _void() -> Any:
    """A placeholder literal for the outputs of a branch that is not taken (never read)."""
    from flytekit.models.literals import Literal, Scalar, Void

    return Literal(scalar=Scalar(none_type=Void()))


def _is_local(result: Any) -> bool:
    return isinstance(result, Promise) and result.is_ready


def gate_values(spec: PipelineSpec, returned: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, bool]:
    """Each il.when condition whose values flytekit produced locally, from what the nodes returned."""
    from interlock.core.model.conditions import decide

    def value_of(b: Binding) -> Any:
        if b.kind is BindingKind.PARAM:
            return (params or {})[b.param or ""]  # KeyError: undecided
        if b.kind is not BindingKind.OUTPUT:
            return b.value
        out = returned[b.node or ""]
        ports = [p.name for p in spec.step_of(b.node or "").outputs]
        flag = out if len(ports) == 1 and ports[0] == "o0" else getattr(out, b.port or "")
        if not _is_local(flag):
            raise KeyError(b.node)
        return _literal_value(flag)

    values: dict[str, bool] = {}
    for g in spec.gates:
        try:
            taken = decide(g, value_of)
        except (AttributeError, TypeError):  # not a local literal: leave the gate undecided
            continue
        if taken is not None:
            values[g.id] = taken
    return values


def _literal_value(p: Any) -> Any:
    """A ready promise's primitive value (what a Flyte condition can compare)."""
    return p.val.scalar.primitive.value


def flyte_expression(cond: Cond, operands: dict[Binding, Any]) -> Any:
    """A flytekit condition expression: comparisons and `&`/`|` of them; NOT pushed to the leaves."""
    c = cond.without_not()

    def render(t: Cond) -> Any:
        if t.op is Op.REF:
            return _is_true(operands[t.operands[0]])
        if t.op is Op.NOT:  # NOT(REF)
            p = operands[t.terms[0].operands[0]]
            return p.is_false() if hasattr(p, "is_false") else not p
        if t.op in COMPARISONS:
            left, right = (operands[b] if b in operands else b.value for b in t.operands)
            return COMPARISONS[t.op](left, right)
        parts = [render(x) for x in t.terms]
        out = parts[0]
        for part in parts[1:]:
            out = (out & part) if t.op is Op.AND else (out | part)
        return out

    return render(c)


def _local_taken(cond: Cond, operands: dict[Binding, Any]) -> bool | None:
    """The condition's value in local execution; None while compiling (values not known yet)."""
    if not operands or not all(_is_local(p) for p in operands.values()):
        return None
    values = {b: _literal_value(p) for b, p in operands.items()}
    return cond.evaluate(lambda b: values[b] if b in values else b.value)


def _is_true(flag: Any) -> Any:
    return flag.is_true() if hasattr(flag, "is_true") else flag


def failure_policy(spec: PipelineSpec) -> Any:
    """The pipeline's failure policy as Flyte's (every workflow it compiles to: sub-workflows too)."""
    from flytekit.core.workflow import WorkflowFailurePolicy

    if spec.failure_policy == CONTINUE:
        return WorkflowFailurePolicy.FAIL_AFTER_EXECUTABLE_NODES_COMPLETE
    return WorkflowFailurePolicy.FAIL_IMMEDIATELY


@dataclass
class Continuing:
    """One flyte-local run under failure_policy="continue": what is down, what returned."""

    downstream: Downstream
    returned: dict[str, Any]


# Set for the duration of one flyte-local run's workflow call (local.py): the body that flytekit
# runs locally is the same function it compiles, and finds its run here.
_CONTINUING: ContextVar[Continuing | None] = ContextVar("interlock_flyte_continuing", default=None)


@contextmanager
def continuing(spec: PipelineSpec, plan: Any, returned: dict[str, Any]) -> Iterator[None]:
    """Around a flyte-local workflow call: emulate failure_policy="continue" if the spec asks for it."""
    if spec.failure_policy != CONTINUE:
        yield
        return
    token = _CONTINUING.set(Continuing(Downstream(plan), returned))
    try:
        yield
    finally:
        _CONTINUING.reset(token)


def _local_execution() -> bool:
    from flytekit.core.context_manager import FlyteContextManager

    state = FlyteContextManager.current_context().execution_state
    return state is not None and state.is_local_execution()


def workflow_defaults() -> Any:
    from flytekit.core.workflow import WorkflowMetadataDefaults

    return WorkflowMetadataDefaults(interruptible=False)


def workflow_function(name: str, types: dict[str, Any], defaults: dict[str, Any], ret: Any,
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
    b = Builder(spec, options or TaskOptions())
    wf = b.workflow()
    tasks = {**b.tasks, **{blk.node.name: b.block_tasks[g] for g, blk in b.blocks.items() if g in b.block_tasks}}
    tasks.update({t.interlock_node: t for t in b.call_finally_tasks.values()})
    return Entities(spec, tasks, wf, b.subworkflows, b.noop, b.finally_task, b.plan)
