"""An elif chain read from a spec: its blocks in order, each block's own condition, and the block
a branch value's option comes from (the authoring side is ``dsl/branches.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlock.core.model.conditions import Cond, condition_of
from interlock.core.model.pipeline_spec import Gate, PipelineSpec
from interlock.core.model.spec import Binding, BindingKind

if TYPE_CHECKING:
    pass


def option_gate(b: Binding, node_gate: Any, parent_of: Any) -> str | None:
    """The block a branch value's option comes from: its node's block, or, for the value of a
    chain nested in the block (a ONE_OF option), the block that holds that chain."""
    if b.kind is BindingKind.ONE_OF:
        inner = option_gate(b.options[0], node_gate, parent_of)
        return parent_of(inner) if inner else None
    return node_gate(b.node or "")


def spec_option_gate(spec: PipelineSpec, b: Binding) -> str | None:
    """``option_gate`` over a finished spec."""
    return option_gate(b, lambda n: spec.node(n).gate, lambda g: spec.gate(g).parent)


# -- reading chains from a spec ----------------------------------------------------------------
def chain_of(spec: PipelineSpec, head: str) -> list[Gate]:
    """The blocks of the chain starting at gate ``head``, in order."""
    chain = [spec.gate(head)]
    while True:
        nxt = next((g for g in spec.gates if g.follows == chain[-1].id), None)
        if nxt is None:
            return chain
        chain.append(nxt)


def head_of(spec: PipelineSpec, gate_id: str) -> str:
    g = spec.gate(gate_id)
    while g.follows is not None:
        g = spec.gate(g.follows)
    return g.id


def own_condition(gate: Gate) -> Cond | None:
    """What a block tests itself (None for il.otherwise); the head's is its whole condition."""
    return gate.own if gate.follows is not None else condition_of(gate)
