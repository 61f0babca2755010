"""Pipelines with il.finally_ around one block (``with il.finally_(step): ...``), KFP's
``dsl.ExitHandler`` around a group of tasks: the finally step runs after the block whatever its
outcome and sees the block's status."""

from __future__ import annotations

import os

import interlock as il
from conformance.finally_pipelines import maybe_fail, prepare, report
from interlock.core.dsl.finally_ import finally_  # il.finally_ once exported


@il.step
def shout(x: int) -> int:
    return x + 100


@il.pipeline(name="conf-finally-block")
def finally_block(x: int = 1, fail: bool = False, out: str = os.devnull):
    y = prepare(x=x)
    before = shout.named("before")(x=y)
    with finally_(report.named("block-cleanup"), label="block", out=out):
        z = maybe_fail(x=y, fail=fail)
        w = shout(x=z)
    return w, before


@il.pipeline(name="conf-finally-both")
def finally_both(x: int = 1, fail: bool = False, out: str = os.devnull):
    """A whole-pipeline finally plus one around a block (not on KFP: its exit handlers are
    outermost only)."""
    finally_(report.named("run-cleanup"), label="run", out=out)
    y = prepare(x=x)
    before = shout.named("before")(x=y)
    with finally_(report.named("block-cleanup"), label="block", out=out):
        z = maybe_fail(x=y, fail=fail)
    return z, before


@il.pipeline(name="conf-finally-block-read")
def finally_block_read(x: int = 1, out: str = os.devnull):
    """A step after the block reads an output made inside it: fine on local and Flyte, refused on KFP."""
    with finally_(report.named("block-cleanup"), label="block", out=out):
        z = maybe_fail(x=x, fail=False)
    return shout.named("after")(x=z)
