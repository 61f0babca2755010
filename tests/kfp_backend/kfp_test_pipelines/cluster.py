"""Steps that give up, for the simulated cluster: each runs as KFP would, once per pod."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

import interlock as il


def _count(calls_dir: str, name: str) -> int:
    # Test instrumentation only: how often the user's code really ran, across "pods".
    path = Path(calls_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


# Each step has KFP retries (set_retry), so a fresh pod may run it again.
SPOT = il.Retry(transient=1, preempted=3)


@il.step(retry=SPOT)
def validate(calls: str) -> int:
    _count(calls, "validate")
    raise il.ValidationFailed("column 'amount' has 12 nulls")


@il.step(retry=SPOT)
def flaky_forever(calls: str) -> int:
    _count(calls, "flaky_forever")
    raise ConnectionResetError("connection reset by peer (simulated)")


@il.step(retry=SPOT)
def bad_frame(calls: str) -> pd.DataFrame:
    _count(calls, "bad_frame")
    return pd.DataFrame({"mixed": [1, "two", 3.0]})  # parquet cannot store this column


@il.step(retry=3)  # a literal port of set_retry(3)
def ported_bug(calls: str) -> int:
    _count(calls, "ported_bug")
    return {"a": 1}["missing"]


@il.step(retry=2)
def stoppable(calls: str) -> int:
    _count(calls, "stoppable")
    (Path(calls) / "stoppable.ready").write_text("running")
    time.sleep(60)  # SIGTERMed by the test long before this ends
    return 1


@il.pipeline(name="kfp-cluster")
def cluster(calls: str):
    validate(calls=calls)
    flaky_forever(calls=calls)
    bad_frame(calls=calls)
    ported_bug(calls=calls)
    stoppable(calls=calls)
