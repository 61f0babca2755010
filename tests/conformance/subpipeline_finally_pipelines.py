"""Sub-pipelines with an il.finally_ in their body (a Flyte sub-workflow with ``on_failure``, a KFP
nested pipeline with a ``dsl.ExitHandler``): the finally step is scoped to each call of the
sub-pipeline, runs after the call's steps whatever their outcome and sees the call's status.
Each finally step writes what it saw under ``out`` (conformance/finally_pipelines.report)."""

from __future__ import annotations

import os

import interlock as il
from conformance.finally_pipelines import maybe_fail, prepare, report
from interlock.core.dsl.branches import otherwise  # il.otherwise once exported
from interlock.core.dsl.finally_ import finally_  # il.finally_ once exported


@il.step
def shout(x: int) -> int:
    return x + 100


@il.pipeline(name="sf-work")
def work(x: int, fail: bool, out: str, label: str = "work"):
    """The sub-pipeline: its finally step reads two of its parameters (one bound to a constant)."""
    finally_(report.named("cleanup"), label=label, out=out)
    y = prepare(x=x)
    maybe_fail(x=y, fail=fail)


@il.pipeline(name="sf-once")
def once(x: int = 1, fail: bool = False, out: str = os.devnull):
    first = shout.named("first")(x=x)
    work(x=first, fail=fail, out=out, label="once")  # x from a step of the caller
    return first


@il.pipeline(name="sf-twice")
def twice(x: int = 1, fail_b: bool = False, out: str = os.devnull):
    work(x=x, fail=False, out=out, label="a")
    work.named("work-b")(x=x, fail=fail_b, out=out, label="b")


@il.pipeline(name="sf-branchy")
def branchy(x: int, fail: bool, out: str):
    """A branch inside the sub-pipeline, and its finally."""
    finally_(report.named("cleanup"), label="branchy", out=out)
    y = prepare(x=x)
    with il.when(y > 2):
        maybe_fail.named("big")(x=y, fail=fail)
    with otherwise():
        shout.named("small")(x=y)


@il.pipeline(name="sf-branch")
def branch(x: int = 1, fail: bool = False, out: str = os.devnull):
    branchy(x=x, fail=fail, out=out)


@il.pipeline(name="sf-in-when")
def in_when(x: int = 1, go: bool = True, fail: bool = False, out: str = os.devnull):
    """A sub-pipeline with a finally called inside an il.when block of the caller."""
    with il.when(go):
        work(x=x, fail=fail, out=out, label="when")


@il.pipeline(name="sf-blocky")
def blocky(x: int, fail: bool, out: str):
    """`with il.finally_(...)` around a block of the sub-pipeline's body."""
    y = prepare(x=x)
    shout.named("head")(x=y)
    with finally_(report.named("block-cleanup"), label="block", out=out):
        z = maybe_fail(x=y, fail=fail)
        shout(x=z)


@il.pipeline(name="sf-block")
def block(x: int = 1, fail: bool = False, out: str = os.devnull):
    blocky(x=x, fail=fail, out=out)


@il.pipeline(name="sf-returning")
def returning(x: int, fail: bool, out: str) -> int:
    finally_(report.named("cleanup"), label="returning", out=out)
    return maybe_fail(x=x, fail=fail)


@il.pipeline(name="sf-read-after")
def read_after(x: int = 1, fail: bool = False, out: str = os.devnull):
    """The sub-pipeline's output read by a step of the caller (on KFP the finally step then runs
    after the body's own nested pipeline, not as an ExitHandler's exit task)."""
    v = returning(x=x, fail=fail, out=out)
    return shout.named("after")(x=v)


@il.pipeline(name="sf-as-output")
def as_output(x: int = 1, out: str = os.devnull):
    """The sub-pipeline's output returned by the caller."""
    return returning(x=x, fail=False, out=out)


@il.pipeline(name="sf-block-returning")
def block_returning(x: int, out: str) -> int:
    with finally_(report.named("block-cleanup"), label="block", out=out):
        z = maybe_fail(x=x, fail=False)
    return z


@il.pipeline(name="sf-block-read-after")
def block_read_after(x: int = 1, out: str = os.devnull):
    """An output made inside a `with il.finally_` block of the sub-pipeline, read by the caller:
    local and Flyte; refused on KFP (an ExitHandler's output)."""
    v = block_returning(x=x, out=out)
    return shout.named("after")(x=v)


@il.pipeline(name="sf-with-outer")
def with_outer(x: int = 1, fail: bool = False, out: str = os.devnull):
    """The caller's own whole-pipeline finally and the sub-pipeline's: each sees its scope."""
    finally_(report.named("run-cleanup"), label="run", out=out)
    work(x=x, fail=fail, out=out, label="sub")


@il.pipeline(name="sf-wrap")
def wrap(x: int, fail: bool, out: str):
    """A sub-pipeline with a finally calling another with a finally: each sees its own call."""
    finally_(report.named("wrap-cleanup"), label="wrap", out=out)
    y = prepare(x=x)
    work(x=y, fail=fail, out=out, label="inner")


@il.pipeline(name="sf-nested")
def nested(x: int = 1, fail: bool = False, out: str = os.devnull):
    wrap(x=x, fail=fail, out=out)


@il.pipeline(name="sf-in-block")
def in_block(x: int = 1, fail: bool = False, out: str = os.devnull):
    """A sub-pipeline with a finally called inside the caller's `with il.finally_` block."""
    y = prepare(x=x)
    with finally_(report.named("block-cleanup"), label="block", out=out):
        work(x=y, fail=fail, out=out, label="inner")


@il.pipeline(name="sf-plain")
def plain(x: int, fail: bool):
    y = prepare(x=x)
    maybe_fail(x=y, fail=fail)


@il.pipeline(name="sf-plain-in-block")
def plain_in_block(x: int = 1, fail: bool = False, out: str = os.devnull):
    """A sub-pipeline without a finally inside the caller's `with il.finally_` block."""
    with finally_(report.named("block-cleanup"), label="block", out=out):
        plain(x=x, fail=fail)
