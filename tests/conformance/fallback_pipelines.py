"""Pipelines with an ``il.attempt()`` block and its fallback (Flyte 2's ``try: r = await strict(x)
except Exception: r = await tolerant(x)``): the fallback runs only if the attempt failed, sees
why, and the run goes on (tests/conformance/test_fallback.py)."""

from __future__ import annotations

import interlock as il


@il.step
def load(x: int) -> int:
    return x + 1


@il.step
def strict(x: int, mode: str) -> int:
    if mode != "ok":
        raise ValueError(f"strict parse of {x} failed")
    return x * 10


@il.step
def refine(x: int) -> int:
    return x + 1


@il.step
def tolerant(x: int, why: il.RunStatus, mode: str) -> int:
    if mode == "both":
        raise RuntimeError("tolerant parse failed too")
    # What the fallback saw of the attempt, as its value: the failed steps' count and the error's kind.
    return -100 * len(why.failed_steps) - (1 if why.error.startswith("FATAL") else 0)


@il.step
def report(v: int) -> str:
    return f"got {v}"


@il.pipeline(name="conf-fallback")
def with_fallback(x: int = 1, mode: str = "ok"):
    """``mode``: "ok" (the attempt succeeds), "fail" (it fails: the fallback runs), "both" (the
    fallback fails too: the run fails)."""
    y = load(x=x)
    with il.attempt() as tried:
        a = strict(x=y, mode=mode)
        r1 = refine(x=a)
    with tried.fallback():
        r2 = tolerant(x=y, why=tried.failure, mode=mode)
    return report(v=il.branch_value(r1, r2))
