"""fraud-retrain unchanged on every local backend: the same metrics, the same cache behaviour,
the same validation stop. A backend that is not installed (``interlock backends``) is skipped.

The expected metrics are computed here without any backend, from the same functions the
steps call: every backend must reproduce them exactly (seeded data, fixed split seed,
deterministic single-threaded training).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from backends import runnable_backends

import interlock as il
from interlock.core.backend.protocol import available_backends
from interlock.plugins.mlflow import MlflowRegistry
from reference_pipelines import fraud_data, fraud_model
from reference_pipelines.fraud_model import TrainParams
from reference_pipelines.fraud_retrain import (
    MODEL_NAME,
    SPLIT_SEED,
    TRIAL_EPOCHS,
    fraud_retrain,
    pick_best,
    search_space,
)

BACKENDS = runnable_backends()
TRAINING = ["ingest", "validate", "transform", "train"]
DOWNSTREAM = ["transform", "champion_params", "train", "find_champion", "evaluate", "champion_gate", "register"]
TUNE = ["search_space", "trial", "pick_best"]  # mode=tune only: a refresh run skips them
SMALL = TrainParams(hidden=8, epochs=2)  # the tune run's base: four quick candidates


@dataclasses.dataclass
class Runs:
    backend: str
    first: il.RunResult
    again: il.RunResult
    still: il.RunResult  # a third identical run: the champion is the one "again" scored
    broken: il.RunResult
    tuned: il.RunResult  # mode=tune around SMALL, after the others
    registry_uri: str

    def registry(self) -> MlflowRegistry:
        return MlflowRegistry(tracking_uri=self.registry_uri)


@pytest.fixture(scope="module")
def expected() -> dict[str, float]:
    splits = fraud_model.stratified_split(fraud_data.generate("2026-11-01"), seed=SPLIT_SEED)
    pre = fraud_model.fit_preprocessing(splits["train"])

    def xy(df: Any) -> tuple[Any, Any]:
        return fraud_model.apply_preprocessing(df, pre), df[fraud_data.LABEL].to_numpy()

    model, _ = fraud_model.fit(*xy(splits["train"]), *xy(splits["valid"]), TrainParams())
    return fraud_model.evaluate_model(model, pre, splits["test"])


@pytest.fixture(scope="module")
def expected_tune() -> tuple[list[float], TrainParams]:
    """The tune run's validation scores per candidate and the winner, computed with no backend."""
    splits = fraud_model.stratified_split(fraud_data.generate("2026-11-01"), seed=SPLIT_SEED)
    pre = fraud_model.fit_preprocessing(splits["train"])

    def xy(df: Any) -> tuple[Any, Any]:
        return fraud_model.apply_preprocessing(df, pre), df[fraud_data.LABEL].to_numpy()

    candidates = search_space.fn(SMALL)
    scores = []
    for c in candidates:
        _, history = fraud_model.fit(*xy(splits["train"]), *xy(splits["valid"]),
                                     dataclasses.replace(c, epochs=min(c.epochs, TRIAL_EPOCHS)))
        scores.append(float(history[-1]["valid_auc"]))
    return scores, pick_best.fn(candidates, scores)


@pytest.fixture(scope="module", params=BACKENDS)
def runs(request, tmp_path_factory) -> Runs:
    backend = request.param
    if backend not in available_backends():
        pytest.skip(f"backend {backend!r} is not installed (see `interlock backends`)")
    home = tmp_path_factory.mktemp(backend)
    registry = home / "mlflow"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)

        def run(**params: Any) -> il.RunResult:
            return il.run(fraud_retrain, backend, workdir=home / "work", raise_on_failure=False,
                          registry=str(registry), **params)

        first = run()
        again = run()
        still = run()
        broken = run(snapshot="corrupt-nulls:2026-11-01")
        tuned = run(mode="tune", params=SMALL)
    return Runs(backend, first, again, still, broken, tuned, f"sqlite:///{Path(registry) / 'mlflow.db'}")


def test_same_metrics_as_computed_without_a_backend(runs, expected):
    first = runs.first
    assert first.succeeded, first.error
    # A fresh workdir has a fresh cache: every step ran, but the search a refresh run skips.
    assert {n: o.status for n, o in first.steps.items()} == {
        n: "skipped" if n in TUNE else "succeeded" for n in first.steps
    }
    assert dict(first["challenger"]) == expected
    assert first["promoted"] is True
    assert first["champion_before"] == "none"
    assert runs.registry().champion(MODEL_NAME) == "1"


def test_rerun_with_identical_inputs_is_served_from_cache(runs):
    again = runs.again
    assert again.succeeded, again.error
    assert {n: again.steps[n].status for n in TRAINING} == dict.fromkeys(TRAINING, "cached")
    assert again["promoted"] is False  # the same model is no better than itself
    assert dict(again["champion"]) == dict(again["challenger"]) == dict(runs.first["challenger"])
    assert again.steps["register"].status != "succeeded"
    assert len(runs.registry().client.search_model_versions(f"name='{MODEL_NAME}'")) == 1


def test_an_unchanged_rerun_is_served_from_cache_end_to_end(runs):
    still, again = runs.still, runs.again
    assert still.succeeded, still.error
    assert again.steps["evaluate"].status == "succeeded"  # the first run had promoted: a new champion
    ran = {n for n, o in still.steps.items() if o.status == "succeeded"}
    assert ran == {"champion_params", "find_champion", "champion_gate"}, {n: o.status for n, o in still.steps.items()}
    assert still.steps["evaluate"].status == "cached"
    assert dict(still["champion"]) == dict(again["champion"]) and still["champion_before"] == "1"


def test_corrupted_snapshot_stops_at_validation_and_registers_nothing(runs):
    broken = runs.broken
    assert broken.status == "failed"
    assert broken.steps["validate"].status == "failed"
    assert all(broken.steps[n].status not in ("succeeded", "cached") for n in DOWNSTREAM), broken.steps
    assert isinstance(broken.error, il.StepFailed) and broken.error.kind == "FATAL"
    receipt = json.loads(Path(broken.receipt_path).read_text())
    validate = next(s for s in receipt["steps"] if s["node"] == "validate")
    message = validate["attempts"][-1]["failure"]["message"]
    assert "column 'amount': not_nullable: 200 failing value(s)" in message
    assert "column 'country': not_nullable" in message
    assert runs.registry().aliases(MODEL_NAME) == {"champion": "1"}
    assert len(runs.registry().client.search_model_versions(f"name='{MODEL_NAME}'")) == 1


def test_a_tune_run_searches_then_trains_the_best_candidate(runs, expected_tune):
    tuned = runs.tuned
    assert tuned.succeeded, tuned.error
    statuses = {n: o.status for n, o in tuned.steps.items()}
    assert statuses["champion_params"] == "skipped", statuses
    assert all(statuses[n] == "succeeded" for n in TUNE), statuses
    assert statuses["train"] == "succeeded", statuses  # new hyperparameters: no cache hit
    report = tuned.maps["trial"]
    assert (report.items, report.failed) == (4, [])
    scores, best = expected_tune
    receipt = json.loads(Path(tuned.receipt_path).read_text())
    train = next(s for s in receipt["steps"] if s["node"] == "train")
    assert (train["facts"]["hidden"], train["facts"]["lr"]) == (best.hidden, best.lr), (train["facts"], scores)
    # The same gate decides: the small tuned model is no better than the champion.
    assert tuned["promoted"] is False and tuned["champion_before"] == "1"


@pytest.mark.parametrize("backend", ["flyte", "kfp"])
def test_compiles_for_a_cluster_with_the_gpu_request(backend, tmp_path):
    if backend not in available_backends():
        pytest.skip(f"backend {backend!r} is not installed (see `interlock backends`)")
    out = tmp_path / ("fraud_retrain.yaml" if backend == "kfp" else "flyte")
    options = {"pipeline_root": "s3://acme-ml/kfp-root"} if backend == "kfp" else {}  # train has KFP retries
    files = il.compile(fraud_retrain, backend, out, image="registry.example.com/fraud:test", **options)
    names = [f.name for f in files]
    if backend == "kfp":
        text = out.read_text()
        assert "nvidia.com/gpu" in text and "nvidia-h200" in text
        assert "reference_pipelines.fraud_retrain:fraud_retrain" in text
        ir = next(yaml.safe_load_all(text))
        tasks = {n: t for c in [ir["root"], *ir["components"].values()] for n, t in c.get("dag", {}).get("tasks", {}).items()}
        # Only train and the tune trials declare retries (preempted=3 for spot); the gate and
        # register run once.
        assert tasks["train"]["retryPolicy"]["maxRetryCount"] == 3
        assert "register" in tasks and {n for n, t in tasks.items() if "retryPolicy" in t} == {"train", "trial"}
    else:
        assert "flyte-package.tgz" in names
        assert any(".train_" in n for n in names) and any(".register_" in n for n in names)
