"""Pipelines that `interlock run` is told to stop (tests/conformance/test_stops.py): a step
waiting, a checkpointing step, a distributed step with a preemption budget, and a step that
leaves a child process running. Each step that waits appends to $STOP_READY first, so the
test knows when (and how often) it started."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import interlock as il


def _ready(what: str) -> None:
    with open(Path(os.environ["STOP_READY"]), "a") as f:
        f.write(what + "\n")


@il.step
def prep(x: int) -> int:
    return x + 1


@il.step(retry=il.Retry(transient=2))
def wait_here(x: int) -> int:
    _ready("attempt")
    time.sleep(60)
    return x


@il.step(checkpoint=il.CheckpointPolicy(every="1h", keep=2))
def train(x: int, ctx: il.StepContext) -> int:
    start = (ctx.checkpoint.load() or {"epoch": 0})["epoch"]
    _ready("training")
    for epoch in range(start, 100_000):
        if ctx.checkpoint_due():  # True once the run is told to stop
            ctx.checkpoint.save({"epoch": epoch})
        time.sleep(0.01)
    return x


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo", timeout="60s"),
         retry=il.Retry(preempted=2))
def spin(x: int) -> int:
    import torch.distributed as dist

    _ready(f"rank {dist.get_rank()}")
    time.sleep(60)
    return x


@il.step
def spawn(x: int) -> int:
    child = subprocess.Popen(["sleep", "60"])  # left running: the step does not wait for it
    _ready(f"child {child.pid}")  # the test ends it
    print("left a child running")
    return x


@il.step
def after(x: int) -> int:
    return x


@il.pipeline(name="stop-waiting")
def stop_waiting(x: int = 1):
    return after(x=wait_here(x=prep(x=x)))


@il.pipeline(name="stop-training")
def stop_training(x: int = 1):
    return after(x=train(x=prep(x=x)))


@il.pipeline(name="stop-distributed")
def stop_distributed(x: int = 1):
    return after(x=spin(x=x))


@il.pipeline(name="leftover-child")
def leftover_child(x: int = 1):
    return after(x=spawn(x=x))
