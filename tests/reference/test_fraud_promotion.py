"""fraud-retrain's register step promotes compare-and-set: only over the champion that
evaluate compared against. Real MLflow on SQLite under tmp_path; the step's own function,
no backend (the full pipeline runs in test_fraud_pipeline_local.py)."""

from __future__ import annotations

import pytest

import interlock as il
from interlock.core.base.status import FailureKind
from interlock.core.failure.rules import classify
from interlock.core.run.context import StepContext
from interlock.plugins.mlflow import ChampionMoved
from reference_pipelines import fraud_data, fraud_model
from reference_pipelines.fraud_model import TrainParams
from reference_pipelines.fraud_retrain import EXPERIMENT, MODEL_NAME, open_registry, register


@pytest.fixture
def registry(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return str(tmp_path / "mlflow")


def _model_dir(auc: float) -> il.Model:
    """A real (untrained) model directory: the register step logs it as an MLflow pyfunc model,
    whose signature MLflow infers by scoring the saved input example."""
    frame = fraud_data.generate("2026-11-01", rows=400)
    pre = fraud_model.fit_preprocessing(frame)
    model = il.Model.new({"valid_auc": auc, "device": "cpu"})
    net = fraud_model.build_model(len(pre["features"]), TrainParams().hidden)
    fraud_model.save_model_dir(net, pre, TrainParams(), model.path, example=frame)
    return model


def _register(registry: str, champion_version: str, auc: float) -> str:
    model = _model_dir(auc)
    ctx = StepContext(pipeline="fraud-retrain", run_id=f"r-{auc}", node="register", backend="local")
    return register.fn(
        model=model, metrics=il.Metrics({"auc": auc}), snapshot="2026-11-01", registry=registry,
        params=TrainParams(), margin=0.01, reason="test", champion_version=champion_version, ctx=ctx,
    )


def _runs(registry: str) -> int:
    reg = open_registry(registry)
    return len(reg.client.search_runs([reg.experiment_id(EXPERIMENT)]))


def test_register_promotes_only_over_the_champion_evaluate_saw(registry):
    assert _register(registry, "none", 0.80) == "1"  # first ever: there was no champion
    reg = open_registry(registry)
    assert reg.champion(MODEL_NAME) == "1"
    runs_before = _runs(registry)

    # A run whose evaluate step read "no champion" before v1 was promoted: refused, and
    # nothing is logged or registered for it.
    with pytest.raises(ChampionMoved) as info:
        _register(registry, "none", 0.85)
    err = info.value
    assert "compared it against no champion, but the champion is now version 1" in str(err)
    assert "re-run the evaluation" in str(err)
    assert classify(err).kind is FailureKind.FATAL
    assert reg.champion(MODEL_NAME) == "1"
    assert [mv.version for mv in reg.client.search_model_versions(f"name='{MODEL_NAME}'")] == [1]
    assert _runs(registry) == runs_before

    # Compared against the champion that still holds: promoted over it.
    assert _register(registry, "1", 0.90) == "2"
    assert reg.aliases(MODEL_NAME) == {"champion": "2", "previous-champion": "1"}
    assert reg.describe(MODEL_NAME, "2").tags["interlock.compared_with"] == "1"
