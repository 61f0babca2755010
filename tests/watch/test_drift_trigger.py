"""Drift as a trigger: the newest fraud snapshot against the training data of the registry's
champion (real MLflow on SQLite, the champion's ``interlock.snapshot`` tag). A drifted snapshot
starts one ``tune`` run with the PSI/KS figures; an undrifted one starts none; each is checked
once. The pipeline is a small one of this suite's, so that the rules are checked in seconds;
test_fraud_watch.py runs the real fraud-retrain the same way."""

from __future__ import annotations

import json
from pathlib import Path

import watch_pipelines as wp

from interlock.core.watch.watcher import Watcher
from interlock.plugins.mlflow import registry_at
from reference_pipelines import fraud_data

MODEL = "fraud-detector"


def _champion_trained_on(store: str, snapshot: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "weights.txt").write_text("a model")
    reg = registry_at(store)
    version = reg.register(MODEL, model_dir, receipt={"pipeline": "fraud-retrain", "snapshot": str(snapshot)})
    reg.promote(MODEL, version)


def test_a_drifted_snapshot_starts_one_tune_run_and_an_undrifted_one_none(tmp_path: Path, clock) -> None:
    store, inbox, work = str(tmp_path / "mlflow"), tmp_path / "inbox", tmp_path / "work"
    trained_on = fraud_data.write_snapshot(tmp_path / "trained", "2026-11-01")
    _champion_trained_on(store, trained_on, tmp_path)
    pipeline = wp.on_drift(str(inbox), store)
    lines: list[str] = []
    watcher = Watcher(pipeline, "local", workdir=work, clock=clock, sleep=clock.sleep, out=lines.append)

    fraud_data.write_snapshot(inbox, "2026-12-01")  # a month later, the world as it was
    calm = watcher.evaluate()
    assert calm.started == []
    [verdict] = calm.decision.verdicts
    assert verdict.why.startswith("no drift in ") and "amount psi=" in verdict.why and "(thresholds: psi 0.2, ks 0.1)" in verdict.why
    clock.advance(hours=2)
    assert watcher.evaluate().started == []  # the same newest data is never measured twice
    assert "already checked (no drift)" in watcher.check().verdicts[0].why

    drifted = fraud_data.write_snapshot(inbox, "drifted:2026-12-02")  # sorts after 2026-12-01: the newest
    clock.advance(hours=2)
    [run] = watcher.evaluate().started
    assert run.status == "succeeded"
    assert run.start.params["mode"] == "tune" and run.start.params["snapshot"] == str(drifted.resolve())
    figures = run.start.params["figures"]
    assert figures["merchant_category"]["psi"] >= 0.2 > figures["amount"]["psi"]
    assert figures["amount"]["ks"] >= 0.1 > figures["hour"]["ks"]
    cause = run.start.cause
    assert cause.kind == "drift" and cause.uri == str(drifted.resolve()) and cause.figures == figures
    receipt = json.loads((work / "runs" / run.run_id / "state" / "receipt.json").read_text())
    assert receipt["parameters"]["mode"] == "tune" and receipt["triggered_by"]["figures"] == figures
    assert "merchant_category psi=0.2" in lines[0]

    clock.advance(hours=2)
    restarted = Watcher(pipeline, "local", workdir=work, clock=clock, sleep=clock.sleep, out=lines.append)
    assert restarted.evaluate().started == []  # one run per drift episode, across restarts
    assert "already checked (drifted: its run started)" in restarted.check().verdicts[0].why


def test_without_a_champion_drift_waits(tmp_path: Path, clock) -> None:
    inbox = tmp_path / "inbox"
    fraud_data.write_snapshot(inbox, "drifted:2026-12-02", rows=500)
    watcher = Watcher(wp.on_drift(str(inbox), str(tmp_path / "mlflow")), "local", workdir=tmp_path / "work", clock=clock)
    decision = watcher.evaluate().decision
    assert decision.starts == [] and decision.verdicts[0].why == "no champion of 'fraud-detector' yet: nothing to compare with"
