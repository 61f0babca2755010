"""Failures through kfp-local: FATAL stops kfp's retries, CONTENTION uses kfp's backoff,
TRANSIENT is retried by the shim inside one task."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import interlock as il


def _count(marker_dir: str, name: str) -> int:
    path = Path(marker_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


@il.step(retry=il.Retry(transient=2, contention=il.Backoff(attempts=3, first="2s", factor=3.0, max_delay="1m"), preempted=1))
def doomed(marker_dir: str) -> int:
    _count(marker_dir, "doomed")
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


@il.step
def after_doomed(x: int) -> int:
    return x + 1


@il.pipeline(name="kfp-fatal")
def fatal(marker_dir: str):
    return after_doomed(x=doomed(marker_dir=marker_dir))


@il.step(retry=il.Retry(transient=0, contention=il.Backoff(attempts=3, first="2s", factor=3.0, max_delay="1m"), preempted=0))
def squeezed(marker_dir: str) -> str:
    n = _count(marker_dir, "squeezed")
    if n < 3:
        raise RuntimeError("0/4 nodes are available: 4 Insufficient nvidia.com/gpu")
    return f"scheduled after {n} tries"


@il.pipeline(name="kfp-contention")
def contention(marker_dir: str):
    return squeezed(marker_dir=marker_dir)


@il.step(retry=il.Retry(transient=2, contention=None, preempted=0))
def flaky(marker_dir: str) -> str:
    n = _count(marker_dir, "flaky")
    if n < 2:
        raise ConnectionResetError("connection reset by peer (simulated)")
    return f"ok after {n}"


@il.pipeline(name="kfp-transient")
def transient(marker_dir: str):
    return flaky(marker_dir=marker_dir)


@il.step(
    retry=il.Retry(transient=0, contention=il.Backoff(attempts=2, first="1s", max_delay="1m"), preempted=0),
    checkpoint=il.CheckpointPolicy(every="1s", keep=2),
)
def resumable(marker_dir: str, ctx: il.StepContext) -> int:
    """Checkpoints epoch 1, then is squeezed off the GPU once; the KFP retry resumes."""
    state = ctx.checkpoint.load()
    if state is None:
        ctx.checkpoint.save({"epoch": 1})
        _count(marker_dir, "resumable-first")
        raise RuntimeError("0/2 nodes are available: 2 Insufficient nvidia.com/gpu")
    return state["epoch"] + 1


@il.pipeline(name="kfp-resume")
def resume(marker_dir: str):
    return resumable(marker_dir=marker_dir)


@il.step(
    retry=il.Retry(transient=0, contention=None, preempted=2),
    checkpoint=il.CheckpointPolicy(every="1s", keep=2),
    interruptible=True,
)
def spot_train(marker_dir: str, ctx: il.StepContext) -> int:
    """Trains 4 epochs, checkpointing each; the spot node is reclaimed (SIGTERM) once at epoch 2.
    Returns the epoch this attempt started from."""
    state = ctx.checkpoint.load() or {"epoch": 0}
    start = state["epoch"]
    for epoch in range(start, 4):
        if epoch == 2 and _count(marker_dir, "reclaimed") == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # the reclaim notice; the shim asks for a checkpoint
        ctx.checkpoint.save({"epoch": epoch + 1})
    return start


@il.pipeline(name="kfp-spot")
def spot(marker_dir: str):
    return spot_train(marker_dir=marker_dir)


@il.step(retry=il.Retry(transient=1, contention=il.Backoff(attempts=3, first="2s", factor=3.0, max_delay="1m")))
def resets_forever(marker_dir: str) -> str:
    _count(marker_dir, "resets_forever")
    raise ConnectionResetError("connection reset by peer (simulated)")


@il.pipeline(name="kfp-transient-spent")
def transient_spent(marker_dir: str):
    return resets_forever(marker_dir=marker_dir)
