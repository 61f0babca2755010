"""Sub-pipeline calls as Flyte sub-workflows.

A call of an ``@il.pipeline`` inside another (core/subpipeline.py) is one scope of the
workflow builder, like an ``il.when`` block: its nodes (and blocks) are emitted into a
``PythonFunctionWorkflow`` of their own, which the enclosing workflow calls as a workflow
node, so the serialized parent holds a workflow node whose ``sub_workflow_ref`` names it and
``get_serializable`` registers it among the sub-workflows. Its inputs are what the call's body
reads from outside it (the caller's parameters and upstream outputs, as bound at the call);
its outputs are what the rest of the pipeline reads from inside it. Flyte caches tasks, not
workflow nodes: the inner steps cache one by one.

Scope keys: an il.when block is its gate id (as before); a call is ``sub:<call name>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlock.core.spec import Binding, BindingKind, PipelineSpec
from interlock.core.subpipeline import scope_chain

if TYPE_CHECKING:
    from .workflow import _Builder

PREFIX = "sub:"


def is_sub(key: str | None) -> bool:
    return bool(key) and str(key).startswith(PREFIX)


def _key(scope: tuple[str, str]) -> str:
    return scope[1] if scope[0] == "gate" else PREFIX + scope[1]


@dataclass
class Scopes:
    """Scope chains (outermost first) of every node and every gate, computed once."""

    nodes: dict[str, list[str]]
    gates: dict[str, list[str]]

    @classmethod
    def of(cls, spec: PipelineSpec) -> Scopes:
        nodes = {n.name: [_key(s) for s in scope_chain(spec, n)] for n in spec.nodes}
        gates = {g.id: [_key(s) for s in scope_chain(spec, scope=("gate", g.id))] for g in spec.gates}
        return cls(nodes, gates)


def node_scopes(spec: PipelineSpec, node: str, scopes: Scopes) -> list[str]:
    return scopes.nodes[node]


def gate_scopes(spec: PipelineSpec, gate: str, scopes: Scopes) -> list[str]:
    """The scopes around a gate's block, the block itself last."""
    return scopes.gates[gate]


def workflow_name(spec: PipelineSpec, key: str) -> str:
    """``<pipeline>.<gate id>`` for a block, ``<pipeline>.<call>`` for a sub-pipeline call."""
    return f"{spec.name}.{key[len(PREFIX):] if is_sub(key) else key}"


def sub_returns(b: _Builder, key: str) -> list[Binding]:
    """What the rest of the pipeline reads from inside the call: the sub-workflow's outputs."""
    spec = b.spec
    inside = set(b.nodes_in(key))
    found: dict[str, Binding] = {}

    def consider(x: Binding) -> None:
        if x.kind is BindingKind.OUTPUT and x.node in inside:
            whole = Binding.of_output(x.node or "", x.port or "")
            found[_wkey(whole)] = whole
        elif x.kind is BindingKind.ONE_OF and set(x.nodes()) <= inside:
            found[_wkey(x)] = x
        elif x.kind is BindingKind.LIST:
            for item in x.items:
                consider(item)
        elif x.kind is BindingKind.ONE_OF:
            for o in x.options:
                consider(o)

    from interlock.core.conditions import condition_of

    for n in spec.nodes:
        if n.name not in inside:
            for _, x in n.inputs:
                consider(x)
    for g in spec.gates:
        if key not in gate_scopes(spec, g.id, b._scopes):
            for x in condition_of(g).bindings():
                consider(x)
    for _, x in spec.outputs:
        consider(x)
    if spec.finally_ is not None:
        for _, x in spec.finally_.inputs:
            consider(x)
    return [found[k] for k in sorted(found)]


def _wkey(x: Binding) -> str:
    from .workflow import _key as key

    return key(x)


def emit_sub(b: _Builder, key: str, values: dict[str, Any]) -> None:
    """Call the sub-workflow of a sub-pipeline call and publish its outputs to the caller's scope."""
    from flytekit.core.promise import Promise

    outputs = values.setdefault("__outputs__", {})
    sub = b.subworkflow(key)
    kwargs = {k: b.value_of(x, values, outputs) for k, x in b.external_bindings(key).items()}
    result = sub(**kwargs)
    _name_workflow_node(key[len(PREFIX):])
    returns = sub_returns(b, key)
    for i, r in enumerate(returns):
        v = result if len(returns) == 1 and isinstance(result, Promise) else getattr(result, f"v{i}")
        if r.kind is BindingKind.OUTPUT:
            outputs.setdefault(r.node or "", {})[r.port or ""] = v
        else:
            values[_wkey(r)] = v


def _name_workflow_node(call: str) -> None:
    """Give the workflow node the call's name (flytekit would call it n<k>)."""
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.utils import _dnsify
    from flytekit.core.workflow import WorkflowBase

    state = FlyteContextManager.current_context().compilation_state
    if state is not None and state.nodes and isinstance(getattr(state.nodes[-1], "flyte_entity", None), WorkflowBase):
        state.nodes[-1]._id = _dnsify(call)
