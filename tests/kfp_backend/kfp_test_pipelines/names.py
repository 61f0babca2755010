"""Output names KFP users see: a single artifact named by its type, NamedTuple fields kept,
a single parameter as KFP's ``Output``, and an artifact output whose type name an input has."""

from __future__ import annotations

import json
from typing import NamedTuple

import interlock as il


class Evaluated(NamedTuple):
    report: il.Metrics
    auc: float


@il.step
def load(n: int) -> il.Dataset:
    ds = il.Dataset.new(metadata={"rows": n})
    (ds.path / "rows.json").write_text(json.dumps(list(range(n))))
    return ds


@il.step
def train(dataset: il.Dataset, epochs: int) -> il.Model:
    rows = json.loads((dataset.path / "rows.json").read_text())
    model = il.Model.new(metadata={"epochs": epochs})
    (model.path / "weights.json").write_text(json.dumps({"w": sum(rows) * epochs}))
    return model


@il.step
def tune(model: il.Model) -> il.Model:
    """The input is already called ``model``: the output cannot be."""
    w = json.loads((model.path / "weights.json").read_text())["w"]
    tuned = il.Model.new(metadata={"tuned": True})
    (tuned.path / "weights.json").write_text(json.dumps({"w": w + 1}))
    return tuned


@il.step
def evaluate(model: il.Model) -> Evaluated:
    w = json.loads((model.path / "weights.json").read_text())["w"]
    return Evaluated(il.Metrics(w=float(w)), 0.5 + w / 100)


@il.step
def summary(report: il.Metrics) -> il.Metrics:
    return il.Metrics(double=report["w"] * 2)


@il.step
def weight(model: il.Model) -> float:
    return float(json.loads((model.path / "weights.json").read_text())["w"])


@il.pipeline(name="sub-trained")
def trained(n: int, epochs: int):
    """A sub-pipeline with one unnamed (artifact) output: KFP's ``Output``, as a pipeline's."""
    return train(dataset=load(n=n), epochs=epochs)


@il.pipeline(name="kfp-names")
def named(n: int = 4, epochs: int = 2):
    model = trained(n=n, epochs=epochs)
    tuned = tune(model=model)
    scored = evaluate(model=tuned)
    return tuned, scored.auc, summary(report=scored.report), weight(model=tuned)
