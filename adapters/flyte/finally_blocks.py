"""``with il.finally_(step): ...`` on Flyte: the block is a sub-workflow with its own failure node.

A block becomes a sub-workflow (as an ``il.when`` block does, without the conditional), whose
failure node (``on_failure``) is the finally step's task and whose last node, downstream of
every other, is the same task: so the step runs after the block whatever its outcome and sees
the block's ``il.RunStatus`` (finally_node.py). A failed block still fails the workflow, as
KFP's ``dsl.ExitHandler`` does. Outputs made in the block and read after it are the
sub-workflow's outputs.

The block is a scope of the plan (core/backend/plan.py FinallyScope, key ``<step>-block``): its
sub-workflow's inputs and nested conditionals are built as an ``il.when`` block's are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlock.core.backend.plan import FinallyScope
from interlock.core.model.spec import Binding, BindingKind

if TYPE_CHECKING:
    from .workflow import Builder


def block_returns(builder: Builder, gid: str) -> list[Binding]:
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


def emit_block(builder: Builder, unit: FinallyScope, values: dict[str, Any]) -> None:
    """Call the block's sub-workflow; what it returns stands for the outputs of the block's nodes."""
    gid = unit.key
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
