"""Pipelines for the failure policy (``il.pipeline(failure_policy=...)``): after a step fails,
"stop" starts nothing new, "continue" runs every step that does not depend on the failure."""

from __future__ import annotations

import os

import interlock as il
from conformance.finally_pipelines import maybe_fail, report
from interlock.core.dsl.finally_ import finally_


@il.step
def inc(x: int) -> int:
    return x + 1


def _two_chains(x: int) -> None:
    b = inc.named("b_first")(x=x)
    a = maybe_fail.named("a_fails")(x=x, fail=True)
    inc.named("a_next")(x=a)
    b2 = maybe_fail.named("b_fails")(x=b, fail=True)
    inc.named("b_next")(x=b2)


@il.pipeline(name="conf-policy-chains-stop")
def chains_stop(x: int = 1):
    """Two independent chains that each fail; the default policy ("stop")."""
    _two_chains(x)


@il.pipeline(name="conf-policy-chains-continue", failure_policy="continue")
def chains_continue(x: int = 1):
    """Two independent chains that each fail; every step not behind a failure runs."""
    _two_chains(x)


def _three_blocks(x: int, out: str) -> None:
    with finally_(report.named("c1"), label="c1", out=out):
        maybe_fail.named("f1")(x=x, fail=True)
    with finally_(report.named("c2"), label="c2", out=out):
        inc.named("s2")(x=x)
    with finally_(report.named("c3"), label="c3", out=out):
        inc.named("s3")(x=x)


@il.pipeline(name="conf-policy-blocks-stop")
def blocks_stop(x: int = 1, out: str = os.devnull):
    """Three sibling il.finally_ blocks; the first block's body fails."""
    _three_blocks(x, out)


@il.pipeline(name="conf-policy-blocks-continue", failure_policy="continue")
def blocks_continue(x: int = 1, out: str = os.devnull):
    """Three sibling il.finally_ blocks; the first block's body fails; the others still run."""
    _three_blocks(x, out)


def _behind_a_failure(x: int, out: str) -> None:
    a = maybe_fail.named("a_fails")(x=x, fail=True)
    with finally_(report.named("c_blocked"), label="c_blocked", out=out):
        inc.named("in_block")(x=a)  # the block reads the failed step: it cannot start
    with il.when(a > 0):
        inc.named("gated_on_failed")(x=x)
    ok = inc.named("independent")(x=x)
    with il.when(ok > 0):
        inc.named("gated")(x=ok)
    with il.when(ok < 0):
        inc.named("closed")(x=ok)


@il.pipeline(name="conf-policy-behind-stop")
def behind_stop(x: int = 1, out: str = os.devnull):
    """A block and an il.when that read a failed step, and independent work beside them."""
    _behind_a_failure(x, out)


@il.pipeline(name="conf-policy-behind-continue", failure_policy="continue")
def behind_continue(x: int = 1, out: str = os.devnull):
    """As behind_stop: what reads the failure is not run, the rest runs (a closed gate skips)."""
    _behind_a_failure(x, out)


@il.pipeline(name="conf-policy-part")
def part(x: int = 1):
    """A sub-pipeline with a failing step and an independent one."""
    maybe_fail.named("bad")(x=x, fail=True)
    return inc.named("good")(x=x)


def _with_call(x: int) -> None:
    good = part(x=x)
    inc.named("reads_good")(x=good)  # the call failed as a whole: its outputs never come out
    inc.named("beside")(x=x)


@il.pipeline(name="conf-policy-call-stop")
def call_stop(x: int = 1):
    _with_call(x)


@il.pipeline(name="conf-policy-call-continue", failure_policy="continue")
def call_continue(x: int = 1):
    _with_call(x)


@il.step
def note(label: str) -> None:
    print(label)


@il.pipeline(name="conf-tidy")
def tidy(label: str = "tidy", rows: int = 10):
    """A sub-pipeline with no outputs (ordered by after= only) and a defaulted parameter."""
    note(label=label)
    return inc.named("rows")(x=rows)


@il.pipeline(name="conf-after-calls", failure_policy="continue")
def after_calls(fail: bool = False):
    """after= on sub-pipeline calls: the first call waits for a step, the second for the first
    call, a step for the second call; `beside` depends on nothing."""
    f = maybe_fail.named("gate_step")(x=1, fail=fail)
    first = tidy.named("first")(label="first", after=f)
    second = tidy.named("second")(label="second", after=first)
    note.named("tail")(label="tail", after=second)
    note.named("beside")(label="beside")
    return second  # tidy called without rows: its default (10) on every backend
