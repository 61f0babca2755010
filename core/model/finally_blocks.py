"""Finally blocks read from a spec: ``RunStatus`` (what a finally step receives), a block's
members, its gate and its call, and whether a run reached it (the authoring side is
``dsl/finally_.py``; settling the status is ``record/outcomes.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.base.status import Status
from interlock.core.model.codecs import qualname
from interlock.core.model.pipeline_spec import FinallyBlock, PipelineSpec

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import Node


@dataclass(frozen=True)
class RunStatus:
    """The final status of a pipeline's body, as a finally step receives it."""

    status: str = "succeeded"  # "succeeded" | "failed" | "stopped"
    failed_steps: list[str] = field(default_factory=list)  # in the pipeline's order
    error: str = ""  # the first failure, "KIND: reason"; "" when the body succeeded

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


def status_port(spec: PipelineSpec, node: Node) -> str | None:
    """The finally step's input that receives the RunStatus; None: it takes none (a plain cleanup,
    as a KFP exit task that is a plain component)."""
    step = spec.step_of(node)
    want = qualname(RunStatus)
    ports = [p.name for p in step.inputs if p.type.name == want]
    if len(ports) > 1:
        raise PipelineDefinitionError(
            f"a finally step takes at most one input of type il.RunStatus (found {len(ports)})",
            pipeline=spec.name, step=node.name,
        )
    return ports[0] if ports else None


def finally_inputs(spec: PipelineSpec, node: Node, inputs: dict[str, Any], status: RunStatus) -> dict[str, Any]:
    """The finally step's inputs with the status filled in (if it takes it)."""
    port = status_port(spec, node)
    return inputs if port is None else {**inputs, port: status}


def is_handler(spec: PipelineSpec, node: str) -> bool:
    """Is this finally step an ``il.on_failure`` handler (it runs only when its scope failed)?"""
    return node in spec.failure_handlers


def handler_runs(status: RunStatus) -> bool:
    """Does a failure handler run for its scope's status? Only on a failure: a stop is no failure
    (Flyte aborts without its failure node), and a succeeded scope needs no handling."""
    return status.status == "failed"


# -- il.finally_ around one block --------------------------------------------------------------
def block_spec(spec: PipelineSpec, block: FinallyBlock) -> PipelineSpec:
    """The spec restricted to one block's nodes: what its finally step's status is settled over.
    A block nested in it counts whole, its finally step too (after the block's last node), as an
    exception from an inner ``finally:`` reaches the outer ``try``."""
    from dataclasses import replace

    members = set(block.members)
    after: dict[str, list[Node]] = {}
    for inner in inner_blocks(spec, block):
        after.setdefault(inner.members[-1], []).append(inner.node)
    nodes = [m for n in spec.nodes if n.name in members for m in (n, *after.get(n.name, ()))]
    return replace(spec, nodes=tuple(nodes), outputs=(), output_types=(), finally_=None, finally_blocks=())


def inner_blocks(spec: PipelineSpec, block: FinallyBlock) -> tuple[FinallyBlock, ...]:
    """The ``with il.finally_`` blocks nested in ``block``, innermost first: each closed before it,
    over some of its members. Not a call's own finally inside it: that one runs after the body on
    the backends that run finally steps last (it is the call's, and the caller's steps go on)."""
    members = set(block.members)
    blocks = spec.finally_blocks
    at = blocks.index(block) if block in blocks else len(blocks)
    return tuple(b for b in blocks[:at] if set(b.members) <= members and not is_call_finally(spec, b))


def blocks_ending_early(spec: PipelineSpec) -> set[str]:
    """The finally steps that run as their block ends, not after the body: those of the ``with
    il.finally_`` blocks (a call's own finally and the whole pipeline's run last)."""
    return {b.node.name for b in spec.finally_blocks if not is_call_finally(spec, b)}


def outer_block(spec: PipelineSpec, block: FinallyBlock) -> FinallyBlock | None:
    """The innermost ``with il.finally_`` block around ``block`` (not a call's own finally: a call
    is its own scope), or None: ``block`` sits at the top of its scope."""
    return next((b for b in spec.finally_blocks if b is not block and not is_call_finally(spec, b)
                 and block in inner_blocks(spec, b)), None)


def block_of(spec: PipelineSpec, node: str) -> FinallyBlock | None:
    """The il.finally_ block whose finally step is ``node``, if any."""
    return next((b for b in spec.finally_blocks if b.node.name == node), None)


def reached(spec: PipelineSpec, block: FinallyBlock, seen: dict[str, Any]) -> bool:
    """Did the run reach the block? Only if one of its steps did (ran, failed, was skipped behind
    a closed gate): like Python's ``try``/``finally``, a block never entered runs no finally step.
    ``seen``: each node's outcome (its ``status``); a node not in it did not start. One rule for
    both failure policies: under "stop" a failure before the block leaves all its steps not-run,
    under "continue" a failure that the block depends on does."""
    for name in block.members:
        saw = seen.get(name)
        if saw is not None and saw.status is not Status.NOT_RUN:
            return True
    return False


def block_call(spec: PipelineSpec, block: FinallyBlock) -> Any:
    """The sub-pipeline call (core/subpipeline.SubCall) a block is written in; None: the top level.
    A finally step recorded inside a call is named ``<call>.<step>``."""
    call = block.node.name.rpartition(".")[0]
    return next((s for s in spec.subs if s.name == call), None) if call else None


def is_call_finally(spec: PipelineSpec, block: FinallyBlock) -> bool:
    """Is ``block`` a sub-pipeline call's whole-body finally (rendered with the call's own
    sub-workflow or nested pipeline)?"""
    c = block_call(spec, block)
    return c is not None and c.finally_ == block.node.name


def blocks_in(spec: PipelineSpec, call: str | None) -> tuple[FinallyBlock, ...]:
    """The ``with il.finally_`` blocks written directly in one scope (a call's body; None: the
    top level), not the calls' own whole-body finally steps."""
    return tuple(b for b in spec.finally_blocks if not is_call_finally(spec, b)
                 and (getattr(block_call(spec, b), "name", None) == call))


def block_gate(spec: PipelineSpec, block: FinallyBlock) -> str | None:
    """The il.when block around a block's scope (a call written inside one): its finally runs
    only if that block was taken."""
    c = block_call(spec, block)
    return c.gate if c is not None else None
