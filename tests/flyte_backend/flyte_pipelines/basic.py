"""Small pipelines exercising types, gates and policies on the Flyte adapter."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

import interlock as il


@dataclass
class TrainParams:
    lr: float = 0.1
    epochs: int = 2


class Split(NamedTuple):
    train: pd.DataFrame
    test: pd.DataFrame


@il.step(cache=il.Cache())
def ingest(snapshot: str, rows: int = 6) -> pd.DataFrame:
    return pd.DataFrame({"x": [float(i) for i in range(rows)], "y": [i % 2 for i in range(rows)], "snap": [snapshot] * rows})


@il.step(cache=il.Cache())
def split(raw: pd.DataFrame) -> Split:
    half = len(raw) // 2
    return Split(raw.iloc[:half].reset_index(drop=True), raw.iloc[half:].reset_index(drop=True))


@il.step(
    cache=il.Cache(),
    resources=il.Resources(cpu="2", memory="4Gi", gpu=1, accelerator="nvidia-h200", shared_memory="2Gi",
                           node_selector={"pool": "gpu"},
                           tolerations=[il.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]),
    retry=il.Retry(transient=2, contention=il.Backoff(attempts=3, first="5m"), preempted=3),
    interruptible=True, timeout="2h",
    labels={"team": "fraud"}, annotations={"owner": "ml@example.com"},
    secrets=[il.Secret("wandb", "api-key")],
    checkpoint=il.CheckpointPolicy(every="10m", keep=2),
)
def train(train: pd.DataFrame, params: TrainParams, ctx: il.StepContext) -> il.Model:
    model = il.Model.new({"lr": params.lr})
    state = ctx.checkpoint.load() if ctx.checkpoint else None
    start = state["epoch"] if state else 0
    for epoch in range(start, params.epochs):
        if ctx.checkpoint:
            ctx.checkpoint.save({"epoch": epoch + 1})
    (model.path / "weights.txt").write_text(f"mean={train['x'].mean()} epochs={params.epochs} resumed_from={start}")
    return model


@il.step(cache=il.Cache())
def evaluate(model: il.Model, test: pd.DataFrame) -> il.Metrics:
    text = (model.path / "weights.txt").read_text()
    return il.Metrics(auc=0.5 + len(test) / 100.0, size=float(len(text)))


@il.step
def decide(metrics: il.Metrics, threshold: float) -> bool:
    return metrics["auc"] >= threshold


@il.step
def register(model: il.Model, metrics: il.Metrics) -> str:
    out = os.environ.get("INTERLOCK_TEST_REGISTRY")
    line = f"registered lr={model.metadata['lr']} auc={metrics['auc']:.2f}"
    if out:
        with open(out, "a") as fh:
            fh.write(line + "\n")
    return line


@il.step
def notify(message: str) -> None:
    out = os.environ.get("INTERLOCK_TEST_REGISTRY")
    if out:
        with open(out, "a") as fh:
            fh.write(f"notify {message}\n")


DEFAULT_PARAMS = TrainParams()


@il.pipeline(name="flyte-demo", schedule="0 3 * * *", labels={"cost-center": "ml-42"})
def demo(snapshot: str = "2026-11-01", threshold: float = 0.5, params: TrainParams = DEFAULT_PARAMS):
    raw = ingest(snapshot=snapshot)
    parts = split(raw=raw)
    model = train(train=parts.train, params=params)
    metrics = evaluate(model=model, test=parts.test)
    ok = decide(metrics=metrics, threshold=threshold)
    with il.when(ok):
        msg = register(model=model, metrics=metrics)
        notify(message=msg)
    return metrics
