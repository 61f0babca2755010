"""Pipelines for the flyte2 tests: one with every policy a task carries, one whose steps fail
the way Flyte 2's retries treat differently (TRANSIENT: retried; FATAL: NonRecoverableError)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import interlock as il


@il.step(cache=il.Cache(ignore_inputs=("note",)))
def ingest(snapshot: str, note: str = "", rows: int = 6) -> pd.DataFrame:
    return pd.DataFrame({"x": [float(i) for i in range(rows)], "snap": [snapshot] * rows})


@il.step(
    cache=il.Cache(),
    resources=il.Resources(cpu="2", memory="4Gi", gpu=2, accelerator="nvidia-h200", shared_memory="2Gi",
                           node_selector={"pool": "gpu"}, queue="team-a", priority_class="high",
                           tolerations=[il.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]),
    retry=il.Retry(transient=2, contention=il.Backoff(attempts=3, first="5m", factor=2, max_delay="1h")),
    interruptible=True, timeout="2h", labels={"team": "fraud"},
    secrets=[il.Secret("wandb", "api-key")],
)
def train(raw: pd.DataFrame, lr: float) -> float:
    return float(raw["x"].mean()) * lr


@il.step(resources=il.Resources(gpu=1, accelerator="nvidia-h200:1g.18gb"))
def probe(score: float) -> str:
    return f"score={score:.3f}"


@il.step(resources=il.Resources(cpu="2", memory="4Gi"))
def describe(raw: pd.DataFrame) -> int:
    return len(raw)


@il.pipeline(name="f2-policies", schedule="0 3 * * *")
def policies(snapshot: str = "s1", lr: float = 0.1):
    raw = ingest(snapshot=snapshot)
    describe(raw=raw)
    return probe(score=train(raw=raw, lr=lr))


def _count(folder: str, name: str) -> int:
    path = Path(folder) / name
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


@il.step(retry=il.Retry(transient=2))
def flaky(folder: str) -> str:
    if _count(folder, "flaky") == 1:
        raise ConnectionResetError("connection reset by peer")  # TRANSIENT: Flyte retries it
    return "ok"


@il.step(retry=il.Retry(transient=2))
def fatal(folder: str, after: str) -> str:
    _count(folder, "fatal")
    raise il.ValidationFailed("bad rows")  # FATAL: not retried, whatever the budget


@il.pipeline(name="f2-retries")
def retries(folder: str):
    return fatal(folder=folder, after=flaky(folder=folder))


@il.step
def square(x: int) -> int:
    return x * x


@il.step
def total(xs: list[int]) -> int:
    return sum(xs)


@il.step(cache=il.Cache())
def items(n: int) -> list[int]:
    return list(range(n))


@il.pipeline(name="f2-shapes")
def shapes(n: int = 4, limit: int = 10):
    t = total(xs=il.map(square, over=items(n=n)))
    with il.when(t > limit):
        big = square.named("big")(x=t)
    with il.otherwise():
        small = square.named("small")(x=1)
    return il.branch_value(big, small)


@il.pipeline(name="f2-inner")
def inner(n: int):
    return total(xs=il.map(square, over=items(n=n)))


@il.pipeline(name="f2-outer")
def outer(n: int = 3):
    return square.named("after")(x=inner(n=n))


def _meet(folder: str, me: str, other: str) -> str:
    # Says it started, then waits for the other to start: only steps run at once both end.
    import time
    from pathlib import Path

    Path(folder, me).write_text("started")
    deadline = time.monotonic() + 60
    while not Path(folder, other).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{other} never started while {me} ran")
        time.sleep(0.02)
    return me


@il.step
def left(folder: str) -> str:
    return _meet(folder, "left", "right")


@il.step
def right(folder: str) -> str:
    return _meet(folder, "right", "left")


@il.step
def both(a: str, b: str) -> str:
    return a + "+" + b


@il.pipeline(name="f2-siblings")
def siblings(folder: str):
    """Two independent steps, then one that reads both."""
    return both(a=left(folder=folder), b=right(folder=folder))


@il.step
def stamp(as_of: str, mode: str) -> str:
    return f"{mode}@{as_of}"


@il.pipeline(name="f2-timed", triggers=[il.Cron("0 3 * * 1", tz="Europe/Berlin", inputs={"mode": "refresh"},
                                               time_input="as_of")])
def timed(as_of: str = "", mode: str = "tune"):
    return stamp(as_of=as_of, mode=mode)


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo"))
def allreduce(x: int) -> int:
    """Each rank adds its rank to x; the sum over the process group (x=1, two ranks: 3)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(x + dist.get_rank())])
    dist.all_reduce(t)
    return int(t.item())


@il.pipeline(name="f2-ddp")
def ddp(x: int = 1):
    return allreduce(x=x)
