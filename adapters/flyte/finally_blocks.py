"""``with il.finally_(step): ...`` on Flyte: the block is a sub-workflow with its own failure node.

A block becomes a sub-workflow (as an ``il.when`` block does, without the conditional), whose
failure node (``on_failure``) is the finally step's task and whose last node, downstream of
every other, is the same task: so the step runs after the block whatever its outcome and sees
the block's ``il.RunStatus`` (finally_node.py). A failed block still fails the workflow, as
KFP's ``dsl.ExitHandler`` does. Outputs made in the block and read after it are the
sub-workflow's outputs.

The workflow builder sees each block as a synthetic gate (``<step>-block``) enclosing the
block's nodes and the ``il.when`` blocks inside it, so the sub-workflow machinery (its
inputs, nested conditionals) is the one ``il.when`` uses.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from interlock.core.model.pipeline_spec import FinallyBlock, Gate, PipelineSpec
from interlock.core.model.spec import Binding, BindingKind

if TYPE_CHECKING:
    from .workflow import _Builder


def gate_id(block: FinallyBlock) -> str:
    return f"{block.node.name}-block"


def with_block_gates(spec: PipelineSpec) -> tuple[PipelineSpec, dict[str, FinallyBlock]]:
    """The spec with each il.finally_ block as a gate around its nodes, and the blocks by gate id.

    A block written in a sub-pipeline's body sits in that call's scope (its gate is one of the
    call's gates, its parent the il.when block around the call, if any). A sub-pipeline call's
    own whole-body finally is not a block here: the call's sub-workflow is its scope
    (subworkflow.py)."""
    from interlock.core.model.finally_blocks import block_call, block_gate, is_call_finally

    found = [b for b in spec.finally_blocks if not is_call_finally(spec, b)]
    if not found:
        return spec, {}
    blocks = {gate_id(b): b for b in found}
    outer = {gid: block_gate(spec, b) for gid, b in blocks.items()}  # the il.when around the block's scope
    owner = {m: gid for gid, b in blocks.items() for m in b.members}
    nodes = tuple(replace(n, gate=owner[n.name]) if n.name in owner and n.gate == outer[owner[n.name]] else n
                  for n in spec.nodes)
    # An il.when block inside the finally block, outermost in the block's scope: its parent is the block's gate.
    top = {}
    for n in spec.nodes:
        gid = owner.get(n.name)
        if gid is not None and n.gate != outer[gid]:
            depth = len(spec.gate_chain(outer[gid])) if outer[gid] else 0
            top[spec.gate_chain(n.gate)[depth].id] = gid
    gates = tuple(replace(g, parent=top[g.id]) if g.id in top else g for g in spec.gates)
    synthetic = tuple(Gate(id=gid, condition=Binding.of_const(True), parent=outer[gid]) for gid in blocks)
    # Calls: a block inside a call is one of its scopes; a call inside a block sits in the block.
    where = {gid: getattr(block_call(spec, b), "name", None) for gid, b in blocks.items()}
    subs = []
    for c in spec.subs:
        inner = tuple(gid for gid in blocks if where[gid] == c.name)
        gid = owner.get(c.nodes[0]) if c.nodes else None
        if gid is not None and c.parent == where[gid] and c.gate == outer[gid]:
            c = replace(c, gate=gid)
        subs.append(replace(c, gates=(*c.gates, *inner)) if inner else c)
    return replace(spec, nodes=nodes, gates=(*synthetic, *gates), subs=tuple(subs)), blocks


def block_returns(builder: _Builder, gid: str) -> list[Binding]:
    """The outputs made in the block that something after it reads (a step, a pipeline output)."""
    inside = set(builder.nodes_in(gid))
    found: list[Binding] = []
    readers = [b for n in builder.spec.nodes if n.name not in inside for _, b in n.inputs]
    readers += [b for _, b in builder.spec.outputs]
    while readers:
        b = readers.pop(0)
        readers += [*b.items, *b.options]
        if b.kind is BindingKind.OUTPUT and b.node in inside:
            whole = Binding.of_output(b.node or "", b.port or "")
            if whole not in found:
                found.append(whole)
    return found


def emit_block(builder: _Builder, gid: str, values: dict[str, Any]) -> None:
    """Call the block's sub-workflow; what it returns stands for the outputs of the block's nodes."""
    sub = builder.subworkflow(gid)
    outputs = values.setdefault("__outputs__", {})
    kwargs = {k: builder.value_of(b, values, outputs) for k, b in builder.external_bindings(gid).items()}
    result = sub(**kwargs)
    if hasattr(result, "with_overrides") and not _ready(result):
        result.with_overrides(node_name=gid)
    returns = block_returns(builder, gid)
    for i, b in enumerate(returns):
        # flytekit hands back a one-output sub-workflow's value as a tuple in local execution
        out = result[i] if isinstance(result, tuple) else result if len(returns) == 1 else getattr(result, f"v{i}")
        outputs.setdefault(b.node or "", {})[b.port or ""] = out


def _ready(p: Any) -> bool:
    from flytekit.core.promise import Promise

    return isinstance(p, Promise) and p.is_ready
