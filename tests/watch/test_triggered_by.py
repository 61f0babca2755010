"""The cause of a triggered run, wherever a run is recorded: the receipt's ``triggered_by``, a
console line at the start, the run report's "Triggered by" with the drift figures, and the
MLflow run's tags; on every backend that runs here (tests/backends.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import watch_pipelines as wp
from backends import backend_params

import interlock as il
from interlock.plugins.mlflow import find_run, registry_at

CAUSE = il.Cause("drift", "drift", "2026-12-02T10:00:00+00:00", uri="s3://bucket/snapshots/2026-12-01.parquet",
                 figures={"amount": {"psi": 0.127, "ks": 0.1447}, "merchant_category": {"psi": 0.229}})


@pytest.mark.parametrize("backend", backend_params())
def test_the_cause_is_in_the_receipt_console_report_and_mlflow(backend: str, tmp_path: Path) -> None:
    events: list[tuple[str, str, str]] = []
    store = str(tmp_path / "mlflow")
    result = il.run(wp.tracked_watch, backend, workdir=tmp_path / "work", run_id="caused-1", store=store,
                    progress=lambda *e: events.append(e), triggered_by=CAUSE)
    assert result.succeeded, result.error

    receipt = json.loads(Path(result.receipt_path).read_text())
    assert receipt["triggered_by"] == CAUSE.to_json()
    assert ("", "triggered", CAUSE.summary()) in events
    assert CAUSE.summary() == ("drift trigger drift: s3://bucket/snapshots/2026-12-01.parquet "
                               "(merchant_category psi=0.229, amount ks=0.145, amount psi=0.127)")
    assert il.Cause("d", "drift", "t", uri="u", figures={f"f{i}": {"psi": i / 10} for i in range(5)}).summary() == (
        "drift trigger d: u (f4 psi=0.4, f3 psi=0.3, f2 psi=0.2, 2 more)")
    report = (Path(result.receipt_path).parent / "report.html").read_text()
    assert "<h2>Triggered by</h2>" in report and "drift merchant_category" in report and "psi 0.229" in report

    reg = registry_at(store)
    exp = reg.client.get_experiment_by_name("tracked-watch")
    tags = reg.client.get_run(find_run(reg, exp.experiment_id, "caused-1")).data.tags
    assert tags["interlock.triggered_by.kind"] == "drift"
    assert tags["interlock.triggered_by.trigger"] == "drift"
    assert tags["interlock.triggered_by.uri"] == CAUSE.uri
    assert json.loads(tags["interlock.triggered_by.figures"]) == CAUSE.figures


def test_a_run_started_by_hand_has_no_cause(tmp_path: Path) -> None:
    result = il.run(wp.nightly, "local", workdir=tmp_path, progress=False)
    assert "triggered_by" not in json.loads(Path(result.receipt_path).read_text())


def test_a_cause_never_carries_a_secret(tmp_path: Path) -> None:
    cause = il.Cause("landed", "data", "2026-12-02T10:00:00+00:00", uri="https://user:hunter2-pass@data.example/s.parquet")
    result = il.run(wp.nightly, "local", workdir=tmp_path, progress=False, triggered_by=cause)
    state = Path(result.receipt_path).parent
    for name in ("receipt.json", "triggered_by.json", "report.html"):
        assert "hunter2-pass" not in (state / name).read_text(), name
    assert json.loads((state / "receipt.json").read_text())["triggered_by"]["uri"] == "https://***@data.example/s.parquet"
