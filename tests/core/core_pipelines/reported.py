"""Pipelines the run report tests run: retries (TRANSIENT at once, CONTENTION after a short
backoff), a cached step, per-epoch metrics, a gate, and a FATAL failure."""

from __future__ import annotations

import interlock as il


@il.step(cache=il.Cache(version="1"))
def ingest(snapshot: str, ctx: il.StepContext) -> int:
    ctx.record_snapshot(snapshot, rows=10)
    return 10


@il.step(retry=il.Retry(transient=2))
def flaky(rows: int, ctx: il.StepContext) -> int:
    if ctx.attempt == 1:
        raise ConnectionResetError("connection reset by peer")
    return rows


@il.step(retry=il.Retry(contention=il.Backoff(attempts=2, first="0.3s")))
def train(rows: int, epochs: int, explode: bool, ctx: il.StepContext) -> float:
    if ctx.attempt == 1:
        raise RuntimeError("0/3 nodes are available: 3 Insufficient nvidia.com/gpu")
    if explode:
        raise il.ValidationFailed("loss is NaN", hint="lower the learning rate")
    loss = 1.0
    for epoch in range(epochs):
        loss *= 0.7
        ctx.log_metric("loss", loss, step=epoch)
        ctx.log_metric("lr", 0.1 / (epoch + 1), step=epoch)
        ctx.progress(epoch + 1, of=epochs, unit="epoch")
    ctx.log_metric("final_loss", loss)
    ctx.record(model="mlp-v2", device="cpu")
    return loss


@il.step
def promote(loss: float) -> str:
    return "promoted"


@il.pipeline(name="reported")
def reported(snapshot: str = "2026-11-01", epochs: int = 5, explode: bool = False):
    loss = train(rows=flaky(rows=ingest(snapshot=snapshot)), epochs=epochs, explode=explode)
    with il.when(loss > 1.0):
        promote(loss=loss)
    return loss
