"""Sub-pipeline calls as Flyte sub-workflows.

A call of an ``@il.pipeline`` inside another (core/dsl/subpipeline.py) is one scope of the
workflow builder, like an ``il.when`` block: its nodes (and blocks) are emitted into a
``PythonFunctionWorkflow`` of their own, which the enclosing workflow calls as a workflow
node, so the serialized parent holds a workflow node whose ``sub_workflow_ref`` names it and
``get_serializable`` registers it among the sub-workflows. Its inputs are what the call's body
reads from outside it (the caller's parameters and upstream outputs, as bound at the call);
its outputs are what the rest of the pipeline reads from inside it. Flyte caches tasks, not
workflow nodes: the inner steps cache one by one.

The call's scope (its units, inputs and outputs) comes from the plan (core/backend/plan.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlock.core.backend.plan import Call, Plan
from interlock.core.model.spec import Binding, BindingKind

if TYPE_CHECKING:
    from .workflow import Builder


def _wkey(x: Binding) -> str:
    from .workflow import binding_key

    return binding_key(x)


def finally_tasks(plan: Plan, options: Any) -> dict[str, Any]:
    """The finally task of each call whose body has an ``il.finally_`` (call name -> task): its
    sub-workflow's failure node and last node, taking the sub-workflow's inputs (what Flyte
    requires of a failure node). Built before any workflow compiles (a task made while one
    compiles takes that workflow as its resolver)."""
    from .finally_node import build_finally_task
    from .types import python_type
    from .workflow import type_of_binding

    spec = plan.spec
    out: dict[str, Any] = {}
    for c in spec.subs:
        unit = plan.call(c.name)
        if unit.finally_ is None:
            continue
        ins, node = unit.inputs, unit.finally_
        types = {k: python_type(type_of_binding(spec, x)) for k, x in ins}
        params_from = {k: x.param or "" for k, x in ins if x.kind is BindingKind.PARAM}
        out[c.name] = build_finally_task(spec, options, node, types, params_from)
    return out


def make(b: Builder, unit: Call) -> Any:
    """The sub-workflow of a sub-pipeline call: inputs and outputs named by the sub-pipeline's own
    parameters and outputs where they match (core/dsl/subpipeline.py call_inputs/call_outputs).

    A call whose body has an ``il.finally_``: the sub-workflow's failure node (``on_failure``) is
    the finally step's task, and so is its last node, downstream of every other node in it, as
    for a ``with il.finally_`` block (finally_blocks.py); a failed body still fails the caller."""
    from flytekit.core.workflow import PythonFunctionWorkflow, WorkflowMetadata

    from .submap import CALL_INDEX, CALL_INDEX_ARG, call_inputs, item_inputs, item_key
    from .tasks import py_ident
    from .types import outputs_type, python_type
    from .workflow import (
        OutputPort,
        failure_policy,
        type_of_binding,
        workflow_defaults,
        workflow_function,
    )

    spec, name = b.spec, unit.call.name
    ins, outs = call_inputs(spec, unit), unit.outputs
    types = {k: python_type(type_of_binding(spec, x)) for k, x in ins}
    # il.map over the call: one item's parameters and index; a call inside a mapped body: the index (submap.py)
    types |= item_inputs(spec, unit) if unit.call.map is not None else b.index_input(unit.key)
    ret = outputs_type(tuple(OutputPort(k, type_of_binding(spec, x)) for k, x in outs),
                       py_ident(f"{spec.name}_{name}_outputs"))
    fin = b.call_finally_tasks.get(name)

    def body(**kwargs: Any) -> Any:
        values: dict[str, Any] = {"__outputs__": {}}
        for k, x in ins:
            if x.kind is BindingKind.OUTPUT:
                values["__outputs__"].setdefault(x.node or "", {})[x.port or ""] = kwargs[k]
            else:
                values[_wkey(x)] = kwargs[k]
        if unit.call.map is not None:
            for p in unit.call.items:
                values[item_key(name, p.name)] = kwargs[item_key(name, p.name)]
            values[CALL_INDEX] = kwargs[CALL_INDEX_ARG]
        elif CALL_INDEX_ARG in kwargs:
            values[CALL_INDEX] = kwargs[CALL_INDEX_ARG]
        b.emit_scope(unit.key, values)
        if fin is not None and unit.finally_ is not None:  # the success path's last node: the call's finally step
            from .finally_node import call_last

            call_last(unit.finally_, fin, dict(kwargs), spec)
        results = [b.value_of(x, values, values["__outputs__"]) for _, x in outs]
        if not results:
            return None
        return results[0] if len(outs) == 1 and outs[0][0] == "o0" else ret(*results)

    fn = workflow_function(py_ident(f"{spec.name}_{name}"), types, {}, ret, body)
    wf = PythonFunctionWorkflow(fn, metadata=WorkflowMetadata(on_failure=failure_policy(spec)),
                                default_metadata=workflow_defaults(), on_failure=fin)
    wf._name = f"{spec.name}.{name}"  # <pipeline>.<call>
    return wf


def emit_sub(b: Builder, unit: Call, values: dict[str, Any], handles: dict[str, Any] | None = None) -> None:
    """Call the sub-workflow of a sub-pipeline call and publish its outputs to the caller's scope.
    ``handles``: the scope's nodes by name, for ``after=`` (Flyte ``>>``) to and from the call."""
    from flytekit.core.promise import Promise

    outputs = values.setdefault("__outputs__", {})
    sub = b.subworkflow(unit.key)
    from .submap import call_inputs

    ins = call_inputs(b.spec, unit)
    result = sub(**{k: b.value_of(x, values, outputs) for k, x in ins}, **b.item_index(values))
    _name_workflow_node(unit.call.name)
    if handles is not None:
        node = _handle(result)
        for up in unit.call.after:  # the sub-workflow node runs after them
            if node is not None and _handle(handles.get(up)) is not None:
                _handle(handles[up]) >> node
        for n in unit.call.nodes:  # after= on the call (an inner node) from outside: the whole call
            handles.setdefault(n, result)
    outs = unit.outputs
    for k, x in outs:
        v = result if len(outs) == 1 and isinstance(result, Promise) else getattr(result, k)
        if x.kind is BindingKind.OUTPUT:
            outputs.setdefault(x.node or "", {})[x.port or ""] = v
        else:
            values[_wkey(x)] = v


def _handle(result: Any) -> Any:
    """What Flyte's ``>>`` orders: a node's promise (the first of several outputs); None in local
    execution (values, not nodes: the body runs in order anyway)."""
    if isinstance(result, tuple) and result:
        result = result[0]
    ready = getattr(result, "is_ready", False)
    return result if hasattr(result, "runs_before") and not ready and getattr(result, "ref", None) else None


def _name_workflow_node(call: str) -> None:
    """Give the workflow node the call's name (flytekit would call it n<k>)."""
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.utils import _dnsify
    from flytekit.core.workflow import WorkflowBase

    state = FlyteContextManager.current_context().compilation_state
    if state is not None and state.nodes and isinstance(getattr(state.nodes[-1], "flyte_entity", None), WorkflowBase):
        state.nodes[-1]._id = _dnsify(call)
