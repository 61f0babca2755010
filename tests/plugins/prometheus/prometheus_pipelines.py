"""Pipelines whose metrics the Prometheus tests read back: a GPU step that waits for data and
checkpoints, a step that fails once (transient) and is retried, and team labels."""

from __future__ import annotations

import time

import interlock as il

TEAM = {"team": "fraud", "cost-center": "ml-42"}


@il.step(labels=TEAM, resources=il.Resources(gpu=1, queue="team-a"), checkpoint=il.CheckpointPolicy())
def train(epochs: int, ctx: il.StepContext) -> float:
    ctx.report_device("cuda", 1)  # bills one GPU on a CPU host: no NVML samples, busy time estimated
    for _ in ctx.timed_data(_slow_batches(epochs)):
        time.sleep(0.05)
    ctx.checkpoint.save({"epochs": epochs})
    return 0.9


def _slow_batches(n: int):
    for i in range(n):
        time.sleep(0.1)  # the loader's fetch: counted as data wait
        yield i


@il.step(labels=TEAM, retry=il.Retry(transient=1))
def evaluate(score: float, ctx: il.StepContext) -> float:
    if ctx.attempt == 1:
        raise ConnectionResetError("the metrics store reset the connection")
    return score


@il.pipeline
def metered(epochs: int = 3) -> float:
    return evaluate(score=train(epochs=epochs))
