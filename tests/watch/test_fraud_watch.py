"""The reference pipeline under ``interlock watch``: fraud_watch.py's drift trigger starts a
``tune`` run of fraud-retrain when live data drifts from the champion's training data (the
champion's ``interlock.snapshot`` tag, set by its own run), and none for undrifted data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import interlock as il
from interlock.core.watch.watcher import Watcher
from reference_pipelines import fraud_data
from reference_pipelines.fraud_model import TrainParams
from reference_pipelines.fraud_watch import watch_pipeline

QUICK = TrainParams(hidden=8, epochs=1)


@pytest.mark.slow
def test_a_drifted_fraud_snapshot_starts_a_tune_run_and_an_undrifted_one_none(tmp_path: Path, clock) -> None:
    store, root, work = str(tmp_path / "mlflow"), tmp_path / "data", tmp_path / "work"
    pipeline = watch_pipeline(root, registry=store)
    # The champion: a refresh run on a labelled snapshot file, the first, so promoted.
    first = fraud_data.write_snapshot(root / "labelled", "2026-11-01")
    champion = il.run(pipeline, "local", workdir=work, progress=False, snapshot=str(first), registry=store, params=QUICK)
    assert champion.outputs["promoted"] is True  # there was no champion

    watcher = Watcher(pipeline, "local", workdir=work, clock=clock, params={"registry": store, "params": QUICK},
                      out=lambda _: None)
    fraud_data.write_snapshot(root / "live", "2026-12-01")
    calm = watcher.evaluate()
    assert calm.started == []  # the labelled file was there first: seen; the live data has not drifted
    assert [v.why.split(":")[0] for v in calm.decision.verdicts] == [
        "first evaluation", "first listing of " + str(root / "labelled"), f"no drift in {(root / 'live' / '2026-12-01.parquet').resolve()}"]

    drifted = fraud_data.write_snapshot(root / "live", "drifted:2026-12-02")
    clock.advance(hours=1)
    [run] = watcher.evaluate().started
    assert run.status == "succeeded"
    assert run.start.params["mode"] == "tune" and run.start.params["snapshot"] == str(drifted.resolve())
    receipt = json.loads((work / "runs" / run.run_id / "state" / "receipt.json").read_text())
    assert receipt["parameters"]["mode"] == "tune"
    assert {s["node"] for s in receipt["steps"] if s["status"] == "succeeded"} >= {"search_space", "pick_best", "train"}
    assert receipt["triggered_by"]["figures"]["merchant_category"]["psi"] >= 0.2
