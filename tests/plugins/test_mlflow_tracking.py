"""One MLflow run per pipeline run, on every backend that runs here, and lineage where the
docs promise it. Real MLflow on a SQLite store, real local / flyte-local / kfp-local runs
(tests/conformance/tracked_pipelines.py), real ML Metadata through the mlmd worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from backends import backend_params, runnable_backends
from conformance.tracked_pipelines import EXPERIMENT, tracked_demo

import interlock as il
from interlock.core.backend.protocol import available_backends
from interlock.core.record import trackers
from interlock.plugins.mlflow import MlflowRegistry, find_run, registry_at

STEPS = {"ingest", "train", "evaluate"}


def _backends() -> list[Any]:
    return backend_params()


@pytest.fixture(autouse=True)
def _no_env_store(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("INTERLOCK_GIT_SHA", "0123456789abcdef0123456789abcdef01234567")


def _pipeline_run(reg: MlflowRegistry, run_id: str) -> Any:
    exp = reg.client.get_experiment_by_name(EXPERIMENT)
    found = find_run(reg, exp.experiment_id, run_id)
    assert found is not None, f"no MLflow run for interlock run {run_id}"
    return reg.client.get_run(found)


def _children(reg: MlflowRegistry, parent: Any) -> dict[str, Any]:
    runs = reg.client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    return {r.data.tags["interlock.node"]: r for r in runs}


@pytest.mark.parametrize("backend", _backends())
def test_each_run_is_one_mlflow_run_with_steps_curves_params_and_receipt(backend, tmp_path):
    store = str(tmp_path / "mlflow")
    result = il.run(tracked_demo, backend=backend, workdir=tmp_path / "work", run_id="tracked-1", store=store, epochs=4)
    assert result.succeeded, result.error
    receipt = json.loads(Path(result.receipt_path).read_text())
    reg = registry_at(store)
    run = _pipeline_run(reg, "tracked-1")

    assert run.info.status == "FINISHED"
    assert run.info.run_name == "tracked-demo-tracked-1"
    # The MLflow run spans the pipeline run (from il.run's start, just before the first step).
    assert int(receipt["started"] * 1000) - 5_000 <= run.info.start_time <= int(receipt["started"] * 1000)
    assert run.info.end_time == int(receipt["ended"] * 1000)
    tags = run.data.tags
    assert tags["mlflow.source.git.commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert tags["mlflow.source.name"].endswith("tracked_pipelines.py")
    assert tags["mlflow.source.type"] == "JOB"
    assert tags["interlock.backend"] == backend and tags["interlock.status"] == "succeeded"
    assert run.data.params == {"snapshot": "2026-11-01", "epochs": "4", "fail": "False", "store": store}
    # Every point of the curve, with its epoch, on the pipeline's run and on the step's.
    history = reg.client.get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(e, 1.0 / e) for e in range(1, 5)]
    assert run.data.metrics["auc"] == 0.75  # logged once by evaluate
    assert run.data.metrics["o0.auc"] == 0.75  # the pipeline's il.Metrics output
    children = _children(reg, run)
    assert set(children) == STEPS
    assert all(c.info.status == "FINISHED" for c in children.values())
    train = children["train"]
    assert [m.step for m in reg.client.get_metric_history(train.info.run_id, "accuracy")] == [1, 2, 3, 4]
    assert train.data.tags["interlock.attempts"] == "1"
    # What the step used, as the receipt has it: data wait, checkpoint time, cost.
    used = next(s for s in receipt["steps"] if s["node"] == "train")
    assert train.data.metrics["interlock.data_wait_s"] == used["usage"]["data_wait_s"] >= 0.02
    assert train.data.metrics["interlock.checkpoint_s"] == used["usage"]["checkpoint_s"] > 0
    assert run.data.metrics["interlock.estimated_cost_usd"] == receipt["totals"]["estimated_cost_usd"]
    assert "interlock.gpu_efficiency" not in run.data.metrics  # a CPU run bills no GPU time
    assert "loss" not in children["ingest"].data.metrics
    artifacts = [a.path for a in reg.client.list_artifacts(run.info.run_id)]
    assert "receipt.json" in artifacts
    logged = json.loads(Path(reg.client.download_artifacts(run.info.run_id, "receipt.json", str(tmp_path))).read_text())
    assert logged["run_id"] == "tracked-1" and logged["backend"] == backend


def test_a_failed_run_is_a_failed_mlflow_run_with_its_curve(tmp_path):
    store = str(tmp_path / "mlflow")
    result = il.run(tracked_demo, backend="local", workdir=tmp_path / "work", run_id="tracked-fail",
                    raise_on_failure=False, store=store, fail=True)
    assert not result.succeeded
    reg = registry_at(store)
    run = _pipeline_run(reg, "tracked-fail")
    assert run.info.status == "FAILED"
    assert run.data.tags["interlock.status"] == "failed"
    assert "invalid configuration" in run.data.tags["interlock.error"]
    children = _children(reg, run)
    assert set(children) == {"ingest", "train"}  # evaluate never ran
    assert children["train"].info.status == "FAILED"
    assert children["train"].data.tags["interlock.failure_kind"] == "FATAL"
    # The points logged before the failure are kept: the curve shows where it broke.
    assert [m.step for m in reg.client.get_metric_history(run.info.run_id, "loss")] == [1, 2, 3]


def test_a_resumed_run_continues_its_mlflow_run_without_repeating_points(tmp_path):
    store = str(tmp_path / "mlflow")
    work = tmp_path / "work"
    first = il.run(tracked_demo, backend="local", workdir=work, run_id="tracked-res", raise_on_failure=False,
                   store=store, fail=True)
    assert not first.succeeded
    again = il.run(tracked_demo, backend="local", workdir=work, resume="tracked-res", fail=False)
    assert again.succeeded
    reg = registry_at(store)
    exp = reg.client.get_experiment_by_name(EXPERIMENT)
    assert len(reg.client.search_runs([exp.experiment_id], "tags.`interlock.kind` = 'pipeline'")) == 1
    run = _pipeline_run(reg, "tracked-res")
    assert run.info.status == "FINISHED"
    # Attempt 1 logged epochs 1-3 and failed; the resumed train logged them again once.
    steps = [m.step for m in reg.client.get_metric_history(run.info.run_id, "loss")]
    assert sorted(steps) == [1, 1, 2, 2, 3, 3]
    assert _children(reg, run)["train"].info.status == "FINISHED"


def test_an_mlflow_store_that_fails_never_fails_the_run(tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    result = il.run(tracked_demo, backend="local", workdir=tmp_path / "work", store=str(blocker / "mlflow"))
    assert result.succeeded
    assert any("tracker mlflow could not record" in r.getMessage() for r in caplog.records)


def test_untracked_pipelines_do_not_touch_mlflow(tmp_path):
    trackers.detach("tracked-demo", "mlflow")
    try:
        result = il.run(tracked_demo, backend="local", workdir=tmp_path / "work", store=str(tmp_path / "mlflow"))
    finally:
        from interlock.plugins.mlflow import track

        track(tracked_demo, experiment=EXPERIMENT, store_param="store")
    assert result.succeeded
    assert not (tmp_path / "mlflow").exists()


def test_mlflow_store_creation_chatter_stays_out_of_the_output(tmp_path):
    code = (
        "from interlock.plugins.mlflow import MlflowRegistry\n"
        f"reg = MlflowRegistry(tracking_dir={str(tmp_path / 'fresh')!r})\n"
        "print('champion', reg.champion('m'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "INTERLOCK_VERBOSE")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "champion None" in proc.stdout
    assert "Creating initial MLflow database tables" not in proc.stdout + proc.stderr
    assert "Running upgrade" not in proc.stdout + proc.stderr


# -- lineage --------------------------------------------------------------------------------------------
def _mlmd_python() -> str | None:
    python = os.environ.get("INTERLOCK_MLMD_PYTHON")
    return python if python and Path(python).exists() else None


needs_mlmd = pytest.mark.skipif(_mlmd_python() is None, reason="no ml-metadata interpreter ($INTERLOCK_MLMD_PYTHON)")


@needs_mlmd
@pytest.mark.parametrize("backend", runnable_backends("lineage.recorded_by_core"))
def test_interlock_lineage_after_a_run_shows_snapshot_to_model(backend, tmp_path, capsys, monkeypatch):
    if backend not in available_backends():
        pytest.skip(f"backend {backend} not installed")
    from interlock.core.cli.main import main

    monkeypatch.delenv("INTERLOCK_MLMD_SQLITE", raising=False)
    work = tmp_path / "work"
    result = il.run(tracked_demo, backend=backend, workdir=work, run_id="lin-1", store=str(tmp_path / "mlflow"))
    assert result.succeeded
    marker = Path(result.receipt_path).parent / "lineage.json"
    kept = json.loads(marker.read_text())
    assert kept["by"] == "interlock" and kept["pending"] is True  # no MLMD worker during the run
    assert not (work / "lineage" / "mlmd.sqlite").exists()
    capsys.readouterr()
    assert main(["lineage", "lin-1", "--workdir", str(work)]) == 0
    text = capsys.readouterr().out
    recorded = json.loads(marker.read_text())
    assert recorded["pending"] is False and recorded["where"] == str(work / "lineage" / "mlmd.sqlite")
    assert f"backend {backend}" in text
    lines = text.splitlines()
    # model <- train <- dataset <- ingest (snapshot 2026-11-01)
    model = next(i for i, x in enumerate(lines) if "system.Model" in x)
    train = next(i for i, x in enumerate(lines) if "<- train [COMPLETE]" in x)
    ingest = next(i for i, x in enumerate(lines) if "<- ingest [COMPLETE]" in x)
    assert model < train < ingest
    assert "snapshots 2026-11-01" in lines[ingest]
    if backend in ("local", "airflow-local"):  # real files, kept under the run's values folder
        assert f"file://{(work / 'runs' / 'lin-1' / 'values' / 'train' / 'o0').resolve()}" in lines[model]
    else:  # flytekit's outputs are temporary: a run-scoped id
        assert "interlock-run://lin-1/train/o0" in lines[model]


def test_a_cache_hit_is_recorded_with_the_artifact_of_the_run_that_produced_it(tmp_path):
    from interlock.core.record.lineage_record import run_record, uris_for

    work = tmp_path / "work"
    produced = work / "runs" / "r-first" / "values" / "ingest" / "o0"
    produced.mkdir(parents=True)
    receipt = {
        "run_id": "r-second", "backend": "local", "git": {"sha": "abc", "dirty": False}, "parameters": {},
        "snapshots": [{"id": "2026-11-01", "node": "ingest"}],
        "steps": [
            {"node": "ingest", "status": "cached", "cached": True, "facts": {"cached_from_run": "r-first"}, "attempts": []},
            {"node": "train", "status": "failed", "cached": False, "facts": {}, "failure_kinds": ["FATAL"],
             "attempts": [{"started": 1.0, "ended": 2.0}]},
        ],
    }
    record = run_record(tracked_demo.spec, receipt, uris_for(work, receipt))
    ingest, train = record["steps"]
    assert ingest["state"] == "CACHED" and ingest["snapshots"] == ["2026-11-01"]
    assert ingest["outputs"] == [{"name": "o0", "uri": produced.resolve().as_uri(), "type": "system.Dataset"}]
    assert train["inputs"] == [{"name": "data", "uri": produced.resolve().as_uri(), "type": "system.Dataset"}]
    assert train["state"] == "FAILED" and train["outputs"] == [] and train["failure_kind"] == "FATAL"


@needs_mlmd
def test_runs_kept_before_ml_metadata_was_set_up_are_recorded_by_the_next_query(tmp_path, capsys, monkeypatch):
    from interlock.core.cli.main import main

    work = tmp_path / "work"
    python = _mlmd_python()
    monkeypatch.setenv("INTERLOCK_MLMD_PYTHON", str(tmp_path / "no-such-python"))
    il.run(tracked_demo, backend="local", workdir=work, run_id="early", store=str(tmp_path / "mlflow"))
    assert main(["lineage", "early", "--workdir", str(work)]) != 0  # not set up: says how
    assert "MLMD_UNAVAILABLE" in capsys.readouterr().err
    monkeypatch.setenv("INTERLOCK_MLMD_PYTHON", python)
    assert main(["lineage", "early", "--workdir", str(work)]) == 0
    assert "<- ingest [COMPLETE]  run early" in capsys.readouterr().out


def test_lineage_of_a_workdir_with_nothing_recorded_says_what_to_do(tmp_path, capsys):
    if _mlmd_python() is None:
        pytest.skip("no ml-metadata interpreter")
    from interlock.core.cli.main import main

    assert main(["lineage", "r-none", "--workdir", str(tmp_path / "empty")]) != 0
    err = capsys.readouterr().err
    assert "nothing has been recorded there yet" in err
    assert "interlock lineage --setup" in err and "check --workdir" in err
