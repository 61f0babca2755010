"""The conformance pipelines: small shapes every backend must run with the same outcomes.

Each entry of CASES names a pipeline, its parameters and what must come out: the run's
status, the pipeline outputs, each step's status and attempts, and for a failure its kind.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

import interlock as il


# -- linear ------------------------------------------------------------------------------------
@il.step
def add_one(x: int) -> int:
    return x + 1


@il.step
def times_two(x: int) -> int:
    return x * 2


@il.step
def describe(x: int, label: str = "value") -> str:
    return f"{label}={x}"


@il.pipeline(name="conf-linear")
def linear(x: int = 3):
    return describe(x=times_two(x=add_one(x=x)))


# -- fan-out / fan-in ----------------------------------------------------------------------------
@il.step
def total(a: int, b: int, c: int) -> int:
    return a + b + c


@il.pipeline(name="conf-fan")
def fan(x: int = 1):
    a = add_one(x=x)
    b = times_two(x=x)
    c = add_one.named("add_one_again")(x=b)
    return total(a=a, b=b, c=c)


# -- gates ---------------------------------------------------------------------------------------
@il.step
def above(x: int, threshold: int) -> bool:
    return x > threshold


@il.step
def announce(x: int) -> str:
    return f"promoted {x}"


@il.pipeline(name="conf-gate")
def gate(x: int = 5, threshold: int = 3):
    passed = above(x=x, threshold=threshold)
    with il.when(passed):
        shown = announce(x=x)
        describe(x=x, label=shown)
    return passed


# -- several outputs ------------------------------------------------------------------------------
class Split(NamedTuple):
    low: int
    high: int
    ratio: float


@il.step
def split(x: int) -> Split:
    return Split(x // 2, x - x // 2, (x // 2) / max(x, 1))


@il.pipeline(name="conf-multi")
def multi(x: int = 7):
    parts = split(x=x)
    return parts.high, total(a=parts.low, b=parts.high, c=0)


# -- dataclass parameters ---------------------------------------------------------------------------
@dataclass
class TrainParams:
    lr: float = 0.1
    epochs: int = 3
    tags: list[str] = field(default_factory=lambda: ["a"])


@dataclass
class Summary:
    steps: int
    final_lr: float
    tagged: bool


@il.step
def fit(params: TrainParams) -> Summary:
    return Summary(steps=params.epochs * 10, final_lr=params.lr / 10, tagged=bool(params.tags))


@il.step
def report(steps: int) -> str:
    return f"{steps} steps"


@il.pipeline(name="conf-dataclass")
def dataclass_params(params: TrainParams = TrainParams(lr=0.5, epochs=2)):  # noqa: B008 - recorded, never mutated
    summary = fit(params=params)
    return summary, report(steps=summary.steps)


# -- DataFrames --------------------------------------------------------------------------------------
@il.step
def make_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"k": list(range(n)), "v": [float(i) * 1.5 for i in range(n)]})


@il.step
def frame_sum(df: pd.DataFrame) -> float:
    return float(df["v"].sum())


@il.pipeline(name="conf-frame")
def frames(n: int = 4):
    return frame_sum(df=make_frame(n=n))


# -- a TRANSIENT failure once, then success ------------------------------------------------------------
@il.step(retry=il.Retry(transient=2))
def flaky(marker_dir: str) -> str:
    marker = Path(marker_dir) / "flaky-attempted"
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(os.getpid()))
        raise ConnectionResetError("connection reset by peer (simulated)")
    return "recovered"


@il.pipeline(name="conf-transient")
def transient(marker_dir: str = "/nonexistent"):
    return flaky(marker_dir=marker_dir)


# -- a FATAL failure: no retry, downstream never runs ----------------------------------------------------
@il.step(retry=il.Retry(transient=2))
def broken(x: int) -> int:
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


@il.pipeline(name="conf-fatal")
def fatal(x: int = 1):
    return add_one(x=broken(x=x))


# -- an Optional artifact that may be None (a first run has no champion metrics) ----------------
@il.step
def maybe_metrics(present: bool) -> il.Metrics | None:
    return il.Metrics(auc=0.75) if present else None


@il.step
def summarize(m: il.Metrics | None) -> str:
    return "none" if m is None else f"auc={m['auc']:.2f}"


@il.pipeline(name="conf-optional")
def optional_artifact(present: bool = False):
    return summarize(m=maybe_metrics(present=present))


# -- one run with every status: cached, succeeded, skipped (closed gate), failed, not-run -----------
@il.step(cache=il.Cache())
def load_value(x: int) -> int:
    return x * 10


@il.step
def explode(x: int, decided: bool) -> int:
    raise RuntimeError("CUDA error: an illegal memory access was encountered")  # FATAL: never retried


@il.pipeline(name="conf-statuses")
def statuses(x: int = 2, threshold: int = 100):
    value = load_value(x=x)
    promote = above(x=value, threshold=threshold)
    with il.when(promote):
        announce(x=value)
    # Reads the gate's decision, so every backend decides the gate before this step fails.
    return add_one(x=explode(x=value, decided=promote))


# What each node of conf-statuses ends as, on every backend; the second run of the same work
# directory is served load_value from the cache.
STATUSES_FIRST = {"load_value": "succeeded", "above": "succeeded", "announce": "skipped", "explode": "failed",
                  "add_one": "not-run"}
STATUSES_AGAIN = {**STATUSES_FIRST, "load_value": "cached"}


@dataclass
class Case:
    pipeline: Any
    params: dict[str, Any]
    status: str
    outputs: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, str] = field(default_factory=dict)  # node -> status
    attempts: dict[str, int] = field(default_factory=dict)  # node -> attempts made
    failure_kind: str | None = None
    failed_step: str | None = None
    needs_marker_dir: bool = False


CASES: dict[str, Case] = {
    "linear": Case(linear, {"x": 3}, "succeeded", {"o0": "value=8"},
                   {"add_one": "succeeded", "times_two": "succeeded", "describe": "succeeded"}),
    "fan": Case(fan, {"x": 2}, "succeeded", {"o0": 3 + 4 + 5}),
    "gate-taken": Case(gate, {"x": 5, "threshold": 3}, "succeeded", {"o0": True},
                       {"above": "succeeded", "announce": "succeeded", "describe": "succeeded"}),
    "gate-not-taken": Case(gate, {"x": 1, "threshold": 3}, "succeeded", {"o0": False},
                           {"above": "succeeded", "announce": "skipped", "describe": "skipped"}),
    "multi": Case(multi, {"x": 7}, "succeeded", {"o0": 4, "o1": 7}),
    "dataclass": Case(dataclass_params, {}, "succeeded",
                      {"o0": Summary(steps=20, final_lr=0.05, tagged=True), "o1": "20 steps"}),
    "dataclass-param": Case(dataclass_params, {"params": TrainParams(lr=1.0, epochs=5, tags=[])}, "succeeded",
                            {"o0": Summary(steps=50, final_lr=0.1, tagged=False), "o1": "50 steps"}),
    "optional-none": Case(optional_artifact, {"present": False}, "succeeded", {"o0": "none"}),
    "optional-present": Case(optional_artifact, {"present": True}, "succeeded", {"o0": "auc=0.75"}),
    "frame": Case(frames, {"n": 4}, "succeeded", {"o0": 9.0}),
    "transient": Case(transient, {}, "succeeded", {"o0": "recovered"}, {"flaky": "succeeded"}, {"flaky": 2},
                      needs_marker_dir=True),
    "fatal": Case(fatal, {"x": 1}, "failed", {}, {"broken": "failed"}, {"broken": 1},
                  failure_kind="FATAL", failed_step="broken"),
}
