"""Steps that fail in controlled ways: a flaky one (TRANSIENT) and a broken one (FATAL).

A counter file (INTERLOCK_TEST_COUNTER) records attempts across retries and processes.
"""

from __future__ import annotations

import os
from pathlib import Path

import interlock as il


def _bump() -> int:
    path = Path(os.environ["INTERLOCK_TEST_COUNTER"])
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


@il.step(retry=il.Retry(transient=2, contention=None, preempted=1))
def flaky(x: int, fail_times: int) -> int:
    if _bump() <= fail_times:
        raise ConnectionResetError("connection reset by peer")
    return x * 2


@il.step(retry=il.Retry(transient=3))
def broken(x: int) -> int:
    _bump()
    raise ValueError(f"bad config: x={x}")


@il.step
def add_one(x: int) -> int:
    return x + 1


@il.pipeline(name="flyte-flaky")
def flaky_pipeline(x: int = 5, fail_times: int = 1):
    return add_one(x=flaky(x=x, fail_times=fail_times))


@il.pipeline(name="flyte-broken")
def broken_pipeline(x: int = 5):
    y = broken(x=x)
    return add_one(x=y)


@il.step(checkpoint=il.CheckpointPolicy(every="1s", keep=2), retry=il.Retry(transient=2))
def resumable(epochs: int, crash_at: int, ctx: il.StepContext) -> str:
    """Saves after every epoch; the first attempt dies (TRANSIENT) at ``crash_at``."""
    state = ctx.checkpoint.load()
    start = state["epoch"] if state else 0
    done = []
    for epoch in range(start, epochs):
        if ctx.attempt == 1 and epoch == crash_at:
            raise ConnectionResetError("NCCL connection reset mid-epoch")
        done.append(epoch)
        ctx.checkpoint.save({"epoch": epoch + 1})
    return f"attempt={ctx.attempt} start={start} ran={done}"


@il.pipeline(name="flyte-resume")
def resume_pipeline(epochs: int = 5, crash_at: int = 3):
    return resumable(epochs=epochs, crash_at=crash_at)


@il.step(timeout="1s", retry=il.Retry(transient=0, contention=None, preempted=0))
def slow(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@il.pipeline(name="flyte-slow")
def slow_pipeline(seconds: float = 30.0):
    return slow(seconds=seconds)


@il.step(retry=il.Retry(transient=2, preempted=5), interruptible=True)
def stopped_step() -> int:
    import os
    import signal
    import time

    os.kill(os.getpid(), signal.SIGTERM)  # `timeout`, `docker stop`, a CI cancel
    time.sleep(30)
    return 1


@il.pipeline(name="flyte-stopped")
def stopped_pipeline():
    return stopped_step()
