"""A small pipeline tracked in MLflow (tests/plugins/test_mlflow_tracking.py): a snapshot, a
training curve per epoch, a wait for data and a checkpoint, a model, a metric; ``fail=True`` makes training fail FATAL after
it logged its curve. The MLflow store is the ``store`` parameter."""

from __future__ import annotations

import time

import pandas as pd

import interlock as il
from interlock.plugins.mlflow import track

EXPERIMENT = "tracked-demo"


@il.step
def ingest(snapshot: str, ctx: il.StepContext) -> pd.DataFrame:
    ctx.record_snapshot(snapshot, rows=4)
    return pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": [0, 1, 0, 1]})


@il.step
def train(data: pd.DataFrame, epochs: int, fail: bool, ctx: il.StepContext) -> il.Model:
    with ctx.waiting_for_data():  # what the receipt and MLflow show as data wait
        time.sleep(0.02)
    for epoch in range(1, epochs + 1):
        ctx.log_metric("loss", 1.0 / epoch, step=epoch)
        ctx.log_metric("accuracy", epoch / (epochs + 1), step=epoch)
    if fail:
        raise ValueError("invalid configuration: fail=True (simulated)")
    ctx.checkpoint.save({"epochs": epochs})  # timed as checkpoint time
    model = il.Model.new({"epochs": epochs, "rows": len(data)})
    (model.path / "weights.txt").write_text("0.5")
    return model


@il.step
def evaluate(model: il.Model, ctx: il.StepContext) -> il.Metrics:
    ctx.log_metric("auc", 0.75)
    return il.Metrics({"auc": 0.75, "rows": float(model.metadata["rows"])})


@il.pipeline(name="tracked-demo")
def tracked_demo(snapshot: str = "2026-11-01", epochs: int = 3, fail: bool = False, store: str = ""):
    data = ingest(snapshot=snapshot)
    model = train(data=data, epochs=epochs, fail=fail)
    return evaluate(model=model)


track(tracked_demo, experiment=EXPERIMENT, store_param="store")
