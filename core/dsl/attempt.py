"""``il.attempt()``: a block tried, and a fallback block that runs only if it failed (Flyte 2
driver code's ``try: r = await strict(x) except Exception: r = await tolerant(x)``).

    with il.attempt() as tried:
        r1 = strict(x=x)
    with tried.fallback():                         # only if the attempt block failed
        r2 = tolerant(x=x, why=tried.failure)      # an il.RunStatus: what failed, and why
    r = il.branch_value(r1, r2)                    # whichever block produced it

The failure is handled: the attempt's remaining steps do not run, the fallback runs with the
attempt's status, and the run goes on; the failed step still shows failed in RunResult.steps
and the receipt, and the run succeeds if everything else does. Without a failure the fallback
block is skipped. What the two blocks make is read after them through ``il.branch_value(made
in the attempt, made in the fallback)`` only (either may not exist). The model: core/model/attempts.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.attempts import AttemptBlock
from interlock.core.model.finally_blocks import RunStatus
from interlock.core.model.spec import Binding, BindingKind

if TYPE_CHECKING:
    from interlock.core.dsl.build import Builder, Promise

HINT = ("with il.attempt() as tried:\n    r1 = strict(x=x)\nwith tried.fallback():\n    r2 = tolerant(x=x)\n"
        "r = il.branch_value(r1, r2)")


class Attempt:
    """What ``il.attempt()`` returns: the tried block, then ``fallback()`` and ``failure``."""

    def __init__(self, builder: Builder):
        self._builder = builder
        self._start = self._end = -1
        self._block: AttemptBlock | None = None

    @property
    def failure(self) -> RunStatus:
        """Stands for the attempt's il.RunStatus in a fallback step's call (the backend fills
        every il.RunStatus input of a fallback step)."""
        return RunStatus("pending")

    def __enter__(self) -> Attempt:
        b = self._builder
        _top_level(b, "il.attempt()")
        b.attempt_open = True
        self._start, self._marks = len(b.nodes), _marks(b)
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> Literal[False]:
        b = self._builder
        b.attempt_open = False
        if exc_type is not None:
            return False
        members = tuple(n.name for n in b.nodes[self._start:])
        _plain(b, members, self._marks, "an il.attempt() block")
        self._end = len(b.nodes)
        self._block = AttemptBlock(f"attempt-{len(b.attempts) + 1}", members)
        b.attempts.append(self._block)
        return False

    def fallback(self) -> _Fallback:
        """The block that runs only if the attempt block failed: written right after it."""
        b = self._builder
        if self._block is None or self._block.fallback:
            raise PipelineDefinitionError(
                "tried.fallback() follows its `with il.attempt() as tried:` block, once", pipeline=b.name, hint=HINT)
        if len(b.nodes) != self._end:
            raise PipelineDefinitionError(
                "tried.fallback() must come right after its il.attempt() block: steps were called in between",
                pipeline=b.name, step=b.nodes[self._end].name, hint=HINT)
        return _Fallback(self)


class _Fallback:
    def __init__(self, attempt: Attempt):
        self._attempt = attempt

    def __enter__(self) -> _Fallback:
        b = self._attempt._builder
        _top_level(b, "tried.fallback()")
        b.attempt_open = True
        self._start, self._marks = len(b.nodes), _marks(b)
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> Literal[False]:
        b = self._attempt._builder
        b.attempt_open = False
        if exc_type is not None:
            return False
        block = self._attempt._block
        assert block is not None
        members = tuple(n.name for n in b.nodes[self._start:])
        _plain(b, members, self._marks, "a fallback block")
        inside = set(members)
        for i in range(self._start, len(b.nodes)):  # it starts once the attempt is over, however it ended
            n = b.nodes[i]
            if not (n.upstream() & inside):
                if n.run_if is not None:
                    raise PipelineDefinitionError(
                        "a fallback block's first steps run once its attempt is over (whatever it did): they "
                        "take no run_if", pipeline=b.name, step=n.name, hint="drop run_if=, or call the step later")
                b.nodes[i] = replace(n, after=(*n.after, *(m for m in block.members if m not in n.after)),
                                     run_if="all_done")
        b.attempts[b.attempts.index(block)] = self._attempt._block = replace(block, fallback=members)
        return False


def attempt() -> Attempt:
    """A block tried: if one of its steps fails, the rest do not run, its ``fallback()`` block
    runs instead, and the run goes on (see the module's doc)."""
    from interlock.core.dsl.build import current_builder

    builder = current_builder()
    if builder is None:
        raise PipelineDefinitionError("il.attempt() is only meaningful inside an @il.pipeline function")
    return Attempt(builder)


def attempt_pair(builder: Builder, values: tuple[Promise, ...]) -> Binding | None:
    """``il.branch_value(made in an attempt, made in its fallback)``: the one that exists; None
    when the values are not such a pair (a chain's branch values)."""
    if len(values) != 2 or not all(v.binding.kind is BindingKind.OUTPUT and not v.binding.field for v in values):
        return None
    tried, backup = (v.binding.node for v in values)
    block = next((a for a in builder.attempts if tried in a.members), None)
    if block is None:
        return None
    if backup not in block.fallback:
        raise PipelineDefinitionError(
            f"il.branch_value({values[0].describe()}, {values[1].describe()}): the second value must be made in "
            "the fallback block of the first one's il.attempt()", pipeline=builder.name, hint=HINT)
    if values[0].type != values[1].type:
        raise PipelineDefinitionError(
            f"il.branch_value: {values[1].describe()} is {values[1].type.describe()}, but {values[0].describe()} is "
            f"{values[0].type.describe()}", pipeline=builder.name, hint="both blocks must produce the same type")
    return Binding.one_of((values[0].binding, values[1].binding))


def attempts_of(builder: Builder, outputs: list[tuple[str, Binding]],
                failure_policy: str = "stop") -> tuple[AttemptBlock, ...]:
    """The attempt blocks recorded, each with a fallback; refuses a read of what they make from
    outside them other than through il.branch_value (it may not exist), and failure_policy=
    "continue" (a fallback would start beside failures it does not handle)."""
    blocks = tuple(builder.attempts)
    if blocks and failure_policy != "stop":
        raise PipelineDefinitionError(
            "il.attempt() handles the failures of its own block; with failure_policy='continue' its fallback "
            "would also start after failures elsewhere that it does not handle", pipeline=builder.name,
            step=blocks[0].members[0], hint="keep failure_policy='stop' (the default) in a pipeline with il.attempt()")
    for a in blocks:
        if not a.fallback:
            raise PipelineDefinitionError(
                f"an il.attempt() block without a fallback: give it `with tried.fallback(): ...` right after "
                f"it (its steps: {list(a.members)})", pipeline=builder.name, step=a.members[0], hint=HINT)
    for a in blocks:
        for scope, what in ((set(a.members), "an il.attempt() block"), (set(a.fallback), "a fallback block")):
            for n in builder.nodes:
                if n.name in scope:
                    continue
                for port, b in n.inputs:
                    found = _direct(b, scope)
                    if found:
                        raise PipelineDefinitionError(
                            f"reads {found!r}, made in {what}, which may not exist (its block failed or was "
                            "skipped)", pipeline=builder.name, step=n.name, port=port,
                            hint="read il.branch_value(made in the attempt, made in the fallback) after both")
            for name, b in outputs:
                found = _direct(b, scope)
                if found:
                    raise PipelineDefinitionError(
                        f"pipeline output {name!r} reads {found!r}, made in {what}, which may not exist",
                        pipeline=builder.name, hint="return il.branch_value(made in the attempt, made in the fallback)")
    return blocks


def _direct(b: Binding, scope: set[str]) -> str | None:
    if b.kind is BindingKind.OUTPUT and b.node in scope:
        return b.node
    for item in b.items:
        found = _direct(item, scope)
        if found:
            return found
    return None


def _marks(b: Builder) -> tuple[int, int, int]:
    return len(b.gates), len(b.subs), len(b.finally_blocks)


def _top_level(b: Builder, what: str) -> None:
    if b._gate_stack or b._sub_stack or b.finally_open or b.attempt_open:
        raise PipelineDefinitionError(
            f"{what} is written at the top level of a pipeline's body (not in an il.when, il.finally_ or other "
            "il.attempt block, nor in a sub-pipeline)", pipeline=b.name, hint=HINT)


def _plain(b: Builder, members: tuple[str, ...], marks: tuple[int, int, int], what: str) -> None:
    if not members:
        raise PipelineDefinitionError(f"{what} records no step", pipeline=b.name, hint=HINT)
    if _marks(b) != marks:
        raise PipelineDefinitionError(
            f"{what} holds steps only (no il.when, il.finally_ or sub-pipeline call in it)", pipeline=b.name,
            step=members[0], hint="call the steps directly in the block")
