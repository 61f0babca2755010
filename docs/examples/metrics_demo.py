"""The pipeline of docs/metrics.md: a GPU step that waits for data and checkpoints, a step
that fails once (TRANSIENT) and is retried, and team labels for cost allocation. Its metrics,
pushed to a Pushgateway, are what tests/plugins/prometheus reads back from Prometheus.

    INTERLOCK_PUSHGATEWAY=127.0.0.1:9091 interlock run docs/examples/metrics_demo.py
"""

from __future__ import annotations

import time

import interlock as il

TEAM = {"team": "fraud", "cost-center": "ml-42"}


@il.step(labels=TEAM, resources=il.Resources(gpu=1, queue="team-a"), checkpoint=il.CheckpointPolicy())
def train(epochs: int, fetch_s: float, ctx: il.StepContext) -> float:
    ctx.report_device("cuda", 1)  # bills one GPU on a CPU host: no NVML samples, busy time estimated
    for _ in ctx.timed_data(_slow_batches(epochs, fetch_s)):
        time.sleep(0.05)  # the step's compute
    ctx.checkpoint.save({"epochs": epochs})
    return 0.9


def _slow_batches(n: int, fetch_s: float):
    for i in range(n):
        time.sleep(fetch_s)  # the loader's fetch: counted as data wait
        yield i


@il.step(labels=TEAM, retry=il.Retry(transient=1))
def evaluate(score: float, ctx: il.StepContext) -> float:
    if ctx.attempt == 1:
        raise ConnectionResetError("the metrics store reset the connection")
    return score


@il.pipeline
def metered(epochs: int = 3, fetch_s: float = 0.1) -> float:
    return evaluate(score=train(epochs=epochs, fetch_s=fetch_s))
