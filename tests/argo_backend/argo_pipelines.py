"""Small pipelines whose compiled containers the argo tests run as local processes."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

import interlock as il


@dataclass
class Summary:
    rows: int
    label: str


@il.step(cache=il.Cache())
def load(snapshot: str, n: int) -> pd.DataFrame:
    return pd.DataFrame({"x": list(range(n)), "snapshot": [snapshot] * n})


@il.step
def summarize(frame: pd.DataFrame, tag: str = "t") -> Summary:
    return Summary(rows=len(frame), label=f"{tag}:{frame['snapshot'].iloc[0]}")


@il.step
def double(rows: int) -> int:
    return rows * 2


@il.step
def shout(label: str, times: int) -> str:
    return label.upper() * times


@il.pipeline(name="argo-chain")
def chain(snapshot: str = "2026-11-01", n: int = 3):
    frame = load(snapshot=snapshot, n=n)
    s = summarize(frame=frame)
    d = double(rows=s.rows)
    with il.when(d > 4):
        shout(label=s.label, times=2)
    return d, s.label


@il.step(retry=il.Retry(transient=1, contention=il.Backoff(attempts=3, first="1m"), preempted=2))
def refuse(x: int) -> int:
    raise il.ValidationFailed(f"bad input {x}")


@il.pipeline(name="argo-fatal")
def fatal(x: int = 1):
    return refuse(x=x)


@il.step(resources=il.Resources(cpu="4", memory="8Gi", shared_memory="2Gi", queue="team-a", priority_class="high"),
         retry=il.Retry(contention=il.Backoff(attempts=4, first="5m", factor=2, max_delay="1h", max_total="6h")),
         timeout="2h", secrets=[il.Secret(group="warehouse", key="token")], env={"MODE": "batch"})
def heavy(x: int) -> int:
    return x


@il.pipeline(name="argo-nightly", schedule="0 3 * * *")
def nightly(x: int = 1):
    return heavy(x=x)
