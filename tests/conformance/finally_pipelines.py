"""Pipelines with an il.finally_ step: it runs after the body whatever its outcome and
receives the body's status; it returns what it saw so that every backend can be compared."""

from __future__ import annotations

import json
import os
from pathlib import Path

import interlock as il
from interlock.core.dsl.finally_ import finally_  # il.RunStatus, il.finally_ once exported
from interlock.core.model.finally_blocks import RunStatus


@il.step
def prepare(x: int) -> int:
    return x + 1


@il.step
def maybe_fail(x: int, fail: bool) -> int:
    if fail:
        raise ValueError(f"bad input {x}")
    return x * 2


@il.step
def report(status: RunStatus, label: str, out: str) -> str:
    # What the finally step received, written where the test reads it on every backend.
    seen = {"label": label, "status": status.status, "failed_steps": status.failed_steps,
            "error": status.error, "type": type(status).__name__}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{label}.json").write_text(json.dumps(seen))
    return status.status


@il.pipeline(name="conf-finally")
def with_finally(x: int = 1, fail: bool = False, out: str = os.devnull):
    finally_(report, label="cleanup", out=out)
    y = prepare(x=x)
    return maybe_fail(x=y, fail=fail)


@il.step
def fragile_item(x: int) -> int:
    if x == 2:
        raise ValueError(f"bad input {x}")
    return x


@il.step
def summed(parts: list[int]) -> int:
    return sum(parts)


@il.pipeline(name="conf-finally-map")
def map_with_finally(xs: list[int] = [1, 2, 3, 4], out: str = os.devnull):  # noqa: B006 - recorded, never mutated
    from interlock.core.dsl.fanout import map as il_map

    finally_(report, label="cleanup", out=out)
    return summed(parts=il_map(fragile_item, over=xs))
