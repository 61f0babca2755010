"""A small pipeline that exercises everything the pictures show (docs/reports.md):
a cached ingest with a data snapshot, a TRANSIENT failure retried once, a GPU/spot training
step that logs a loss and an AUC per epoch, a fan-out, a gate and a finally step.

    interlock graph docs/examples/report_demo.py --html build/graph.html
    interlock run docs/examples/report_demo.py --run-id demo -p busy_gpu=true   # writes report.html too
    interlock show demo                                           # points at it
"""

from __future__ import annotations

import math
import time

import interlock as il


@il.step(cache=il.Cache(version="1"))
def ingest(snapshot: str, ctx: il.StepContext) -> list[float]:
    """Read the snapshot (here: a seeded series) and declare it for the receipt."""
    rows = [math.sin(i / 7.0) for i in range(200)]
    ctx.record_snapshot(snapshot, rows=len(rows))
    return rows


@il.step(retry=il.Retry(transient=2))
def features(rows: list[float], ctx: il.StepContext) -> list[float]:
    """Fails once with a connection reset (TRANSIENT) and succeeds when retried."""
    if ctx.attempt == 1:
        raise ConnectionResetError("feature store: connection reset by peer")
    return [r * r for r in rows]


@il.step(
    resources=il.Resources(cpu="2", memory="4Gi", gpu=1, accelerator="nvidia-h200"),
    retry=il.Retry(transient=2, contention=il.Backoff(attempts=3, first="1s"), preempted=3),
    checkpoint=il.CheckpointPolicy(every="1m", keep=2),
    interruptible=True,
)
def train(feats: list[float], epochs: int, busy_gpu: bool, ctx: il.StepContext) -> float:
    """Log a loss and a validation AUC per epoch: the run report draws them as curves.
    With ``busy_gpu`` the first attempt finds the GPU busy (CONTENTION): a 1s backoff."""
    if busy_gpu and ctx.attempt == 1:
        raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable")
    auc = 0.5
    for epoch in range(epochs):
        time.sleep(0.05)  # a stand-in for an epoch's work
        loss = 1.0 / (1 + epoch) + 0.02 * math.sin(epoch)
        auc = 0.95 - 0.45 * math.exp(-epoch / 3.0)
        ctx.log_metric("loss", loss, step=epoch)
        ctx.log_metric("valid_auc", auc, step=epoch)
        ctx.progress(epoch + 1, of=epochs, unit="epoch")
    return round(auc, 4)


@il.step
def shards(n: int) -> list[int]:
    return list(range(n))


@il.step
def score(shard: int, auc: float) -> float:
    return round(auc - 0.01 * shard, 4)


@il.step
def worst(scores: list[float]) -> float:
    return min(scores)


@il.step
def register(auc: float) -> str:
    return f"registered (auc {auc})"


@il.step
def notify(status: il.RunStatus, channel: str) -> str:
    return f"[{channel}] {status.status}"


@il.pipeline(name="report-demo")
def report_demo(
    snapshot: str = "2026-11-01", epochs: int = 12, n_shards: int = 3, channel: str = "#ml", busy_gpu: bool = False,
):
    """Ingest, featurize, train, score shards; register when the worst shard clears 0.9."""
    il.finally_(notify, channel=channel)
    auc = train(feats=features(rows=ingest(snapshot=snapshot)), epochs=epochs, busy_gpu=busy_gpu)
    low = worst(scores=il.map(score, over=shards(n=n_shards), auc=auc))
    with il.when(low > 0.9):
        register(auc=low)
    return low


if __name__ == "__main__":
    print(il.run(report_demo).receipt_path)
