"""A cached step that declares the data snapshot it read."""

from __future__ import annotations

import interlock as il


@il.step(cache=il.Cache())
def load(snapshot: str, ctx: il.StepContext) -> int:
    ctx.record_snapshot(snapshot, rows=42)
    return 42


@il.step
def use(rows: int) -> int:
    return rows + 1


@il.pipeline(name="snapshots")
def snapshots(snapshot: str = "snap-1"):
    return use(rows=load(snapshot=snapshot))
