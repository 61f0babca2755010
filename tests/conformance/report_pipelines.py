"""A pipeline for the run report on every backend: a cached step, a step that logs a curve
per epoch, and a gate whose block is skipped."""

from __future__ import annotations

import interlock as il


@il.step(cache=il.Cache(version="1"))
def load(n: int) -> int:
    return n


@il.step
def fit(n: int, ctx: il.StepContext) -> float:
    loss = 1.0
    for epoch in range(n):
        loss *= 0.5
        ctx.log_metric("loss", loss, step=epoch)
    return loss


@il.step
def publish(loss: float) -> str:
    return f"published {loss}"


@il.pipeline(name="conf-report")
def reported(n: int = 4):
    loss = fit(n=load(n=n))
    with il.when(loss > 0.5):  # 1/2**n: never above 0.5, so publish is skipped
        publish(loss=loss)
    return loss
