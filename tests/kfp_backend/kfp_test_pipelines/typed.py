"""Every portable type across KFP: primitives, list/dict, dataclasses, DataFrame, Model, Metrics,
several outputs, a gate on a step's bool and a champion gate."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

import pandas as pd

import interlock as il


@dataclass
class TrainParams:
    lr: float = 0.1
    epochs: int = 3
    tags: list[str] = field(default_factory=lambda: ["base"])


@dataclass
class Report:
    auc: float
    rows: int
    approved: bool


class Trained(NamedTuple):
    model: il.Model
    metrics: il.Metrics
    rows: int
    counts: dict[str, int]


@il.step(cache=il.Cache())
def make_frame(n: int, scale: float = 1.5) -> pd.DataFrame:
    return pd.DataFrame({"k": list(range(n)), "v": [i * scale for i in range(n)]})


@il.step(cache=il.Cache())
def train(df: pd.DataFrame, params: TrainParams, ctx: il.StepContext) -> Trained:
    ctx.record_snapshot("frame-v1", source="make_frame")
    model = il.Model.new(metadata={"framework": "none", "epochs": params.epochs})
    (model.path / "weights.json").write_text(json.dumps({"w": float(df["v"].sum()) * params.lr}))
    auc = min(0.99, 0.5 + 0.1 * params.epochs)
    return Trained(model, il.Metrics(auc=auc, loss=1 - auc), len(df), {"rows": len(df), "epochs": params.epochs})


@il.step
def evaluate(model: il.Model, metrics: il.Metrics, rows: int, tags: list[str]) -> Report:
    weights = json.loads((model.path / "weights.json").read_text())
    assert weights["w"] > 0
    return Report(auc=metrics["auc"], rows=rows, approved=metrics["auc"] > 0.7 and bool(tags))


@il.step
def register(model: il.Model, report: Report, note: str) -> str:
    return f"registered {model.metadata['framework']} auc={report.auc:.2f} rows={report.rows} {note}"


@il.step
def total(counts: dict[str, int]) -> int:
    return sum(counts.values())


@il.pipeline(name="kfp-typed")
def typed(n: int = 4, params: TrainParams = TrainParams(lr=0.5, epochs=3), margin: float = 0.0):  # noqa: B008 - a pipeline default, recorded as JSON
    df = make_frame(n=n)
    trained = train(df=df, params=params)
    report = evaluate(model=trained.model, metrics=trained.metrics, rows=trained.rows, tags=["holdout", "v1"])
    decision = il.champion_gate(challenger=trained.metrics, metric="auc", margin=margin)
    with il.when(decision.promote):
        register(model=trained.model, report=report, note="champion")
    return report, total(counts=trained.counts), decision.promote, trained.model


@il.step
def approve(rows: int) -> Report:
    return Report(auc=0.9, rows=rows, approved=rows > 2)


@il.step
def ship(rows: int) -> str:
    return f"shipped {rows}"


@il.pipeline(name="kfp-field-gate")
def field_gate(rows: int = 3):
    report = approve(rows=rows)
    with il.when(report.approved):
        ship(rows=report.rows)
    return report


@il.step
def count(n: int) -> int:
    return n


@il.step
def half(x: float) -> float:
    return x / 2


@il.pipeline(name="kfp-widen")
def widen(n: int = 3):
    """int -> float wiring, which interlock allows and KFP's own type check refuses."""
    return half(x=count(n=n)), half.named("half_param")(x=n), half.named("half_const")(x=5)


@il.step
def maybe(x: int | None = None, label: str | None = None) -> str | None:
    return None if x is None and label is None else f"{x}-{label}"


@il.step
def plain(x: int | None = None) -> int:
    return -1 if x is None else x


@il.pipeline(name="kfp-optional")
def optional(x: int | None = None, label: str = "a"):
    """Optional values: KFP has no null parameter, so they travel as JSON text."""
    return maybe(x=x, label=label), maybe.named("bare")(), plain(x=plain.named("seed")(x=3))


@il.step
def positive(x: int) -> bool:
    return x > 0


@il.step
def big(x: int) -> bool:
    return x > 10


@il.pipeline(name="kfp-nested")
def nested(x: int = 20):
    with il.when(positive(x=x)):
        ship.named("ship_positive")(rows=x)
        with il.when(big(x=x)):
            ship.named("ship_big")(rows=x)
    ship.named("ship_always")(rows=x)
