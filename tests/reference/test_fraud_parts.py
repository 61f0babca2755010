"""The fraud pipeline's parts, without a backend: data, contract, split, features, training, metrics."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import interlock as il
from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.local import LocalCheckpointStore
from interlock.plugins.pandera import validate
from reference_pipelines import fraud_data, fraud_model, fraud_schema
from reference_pipelines.fraud_model import TrainParams
from reference_pipelines.fraud_retrain import transform

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def snapshot() -> pd.DataFrame:
    return fraud_data.generate("2026-11-01")


@pytest.fixture(scope="module")
def schema():
    return fraud_schema.schema()


# -- data ---------------------------------------------------------------------------------
def test_snapshot_id_fully_determines_the_data(snapshot):
    again = fraud_data.generate("2026-11-01")
    pd.testing.assert_frame_equal(snapshot, again)
    assert fraud_data.content_sha256(snapshot) == fraud_data.content_sha256(again)
    assert fraud_data.content_sha256(fraud_data.generate("2026-11-02")) != fraud_data.content_sha256(snapshot)


def test_seed_does_not_depend_on_the_process():
    # Python's hash() is salted per process; the seed must come from sha256 instead.
    code = "from reference_pipelines import fraud_data as f; print(f.content_sha256(f.generate('2026-11-01')))"
    shas = set()
    for salt in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": salt},
        )
        shas.add(out.stdout.strip())
    assert shas == {fraud_data.content_sha256(fraud_data.generate("2026-11-01"))}
    digest = hashlib.sha256(b"interlock-fraud-snapshot:2026-11-01").digest()
    assert fraud_data.snapshot_seed(fraud_data.BASE_DATE) == int.from_bytes(digest[:8], "big") >> 1


def test_snapshot_shape_and_fraud_rate(snapshot):
    assert list(snapshot.columns) == list(fraud_data.COLUMNS)
    assert len(snapshot) == fraud_data.ROWS
    assert snapshot["tx_id"].is_unique
    assert 0.02 <= snapshot[fraud_data.LABEL].mean() <= 0.04
    assert set(snapshot["merchant_category"]) == set(fraud_data.MERCHANT_CATEGORIES)
    assert set(snapshot["country"]) <= set(fraud_data.COUNTRIES)
    # is_foreign is consistent with being a feature, not noise: foreign transactions are riskier.
    rate = snapshot.groupby("is_foreign")[fraud_data.LABEL].mean()
    assert rate[True] > 2 * rate[False]


def test_later_snapshots_drift_a_little_and_still_pass(snapshot, schema):
    later = fraud_data.generate("2027-11-01")
    assert later["amount"].mean() > snapshot["amount"].mean()
    assert later[fraud_data.LABEL].mean() > snapshot[fraud_data.LABEL].mean()
    validate(later, schema, step="validate")  # a year of drift is within the baseline's tolerance


@pytest.mark.parametrize("bad", ["2026-13-01", "corrupt-typo:2026-11-01", "corrupt-nulls", "latest"])
def test_bad_snapshot_ids_are_refused(bad):
    with pytest.raises(ValueError, match="bad snapshot id"):
        fraud_data.parse_snapshot(bad)


def test_corruption_keeps_the_clean_rows_elsewhere(snapshot):
    damaged = fraud_data.generate("corrupt-nulls:2026-11-01")
    nulls = damaged["amount"].isna()
    assert nulls.sum() == fraud_data.ROWS // 100
    pd.testing.assert_series_equal(damaged.loc[~nulls, "amount"], snapshot.loc[~nulls, "amount"])


# -- the contract -----------------------------------------------------------------------------
def test_shipped_baseline_is_the_reference_snapshots(tmp_path):
    fresh = fraud_schema.write_reference_baseline(tmp_path / "baseline.json")
    shipped = json.loads(fraud_schema.BASELINE_PATH.read_text())
    assert shipped == json.loads(json.dumps(fresh))
    assert set(shipped["columns"]) == set(fraud_schema.BASELINE_COLUMNS)


def test_clean_snapshot_passes_the_contract(snapshot, schema):
    out = validate(snapshot, schema, step="validate")
    pd.testing.assert_frame_equal(out, snapshot)


@pytest.mark.parametrize(
    ("mode", "column", "check"),
    [
        ("nulls", "amount", "not_nullable"),
        ("nulls", "country", "not_nullable"),
        ("range", "amount", "greater_than(0.0)"),
        ("range", "amount", "less_than_or_equal_to(50000.0)"),
        ("missing", "card_age_days", "column_in_dataframe"),
        ("shift", "amount", "distribution_shift(mean, max 0.5 sigmas)"),
    ],
)
def test_each_corruption_fails_the_contract_naming_column_and_check(schema, mode, column, check):
    with pytest.raises(il.ValidationFailed) as info:
        validate(fraud_data.generate(f"corrupt-{mode}:2026-11-01"), schema, step="validate")
    failing = {(e["column"], e["check"]) for e in info.value.report}
    assert (column, check) in failing
    assert f"column {column!r}" in str(info.value)


def test_only_the_baseline_catches_a_currency_bug(schema):
    shifted = fraud_data.generate("corrupt-shift:2026-11-01")
    validate(shifted, fraud_schema.base_schema())  # types and ranges are all fine...
    with pytest.raises(il.ValidationFailed, match="sigmas from the baseline"):
        validate(shifted, schema)  # ...the distribution is not


def test_schema_version_tracks_the_baseline_file():
    assert len(fraud_schema.SCHEMA_VERSION) == 16
    assert fraud_schema.SCHEMA_VERSION == fraud_schema._version()


# -- split and features: no leakage ---------------------------------------------------------------
@pytest.fixture(scope="module")
def transformed(snapshot) -> il.Dataset:
    return transform.fn(clean=snapshot, snapshot="2026-11-01")


def _read(ds: il.Dataset) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(ds / f"{name}.parquet") for name in ("train", "valid", "test")}


def test_split_is_stratified_disjoint_and_complete(snapshot, transformed):
    splits = _read(transformed)
    ids = [set(df["tx_id"]) for df in splits.values()]
    for a, b in itertools.combinations(ids, 2):
        assert not a & b
    assert set().union(*ids) == set(snapshot["tx_id"])
    overall = snapshot[fraud_data.LABEL].mean()
    for name, df in splits.items():
        assert abs(df[fraud_data.LABEL].mean() - overall) < 0.002, name
        assert transformed.metadata["rows"][name] == len(df)
    assert [len(df) for df in splits.values()] == [14_000, 3_000, 3_000]


def test_preprocessing_is_fitted_on_the_train_split_only(snapshot, transformed):
    splits = _read(transformed)
    stored = json.loads((transformed / fraud_model.PREPROCESSING_FILE).read_text())
    assert stored == fraud_model.fit_preprocessing(splits["train"])
    assert stored != fraud_model.fit_preprocessing(snapshot)  # what a leaky pipeline would store
    # Changing every held-out row changes nothing that was fitted.
    poisoned = snapshot.copy()
    held_out = ~poisoned["tx_id"].isin(splits["train"]["tx_id"])
    poisoned.loc[held_out, "amount"] *= 100
    poisoned.loc[held_out, "card_age_days"] = 0
    again = transform.fn(clean=poisoned, snapshot="2026-11-01")
    assert json.loads((again / fraud_model.PREPROCESSING_FILE).read_text()) == stored


def test_feature_order_survives_the_json_round_trip(transformed):
    pre = fraud_model.fit_preprocessing(_read(transformed)["train"])
    stored = json.loads(json.dumps(pre, sort_keys=True))
    frame = _read(transformed)["test"]
    x = fraud_model.apply_preprocessing(frame, pre)
    np.testing.assert_array_equal(x, fraud_model.apply_preprocessing(frame, stored))
    assert x.shape[1] == len(pre["features"])
    # Column j is the feature pre["features"][j]: check one numeric and one one-hot column.
    j = pre["features"].index("hour")
    hour = next(n for n in pre["numeric"] if n["column"] == "hour")
    np.testing.assert_allclose(x[:, j], (frame["hour"] - hour["mean"]) / hour["std"], rtol=1e-6)
    k = pre["features"].index("country=US")
    np.testing.assert_array_equal(x[:, k], (frame["country"] == "US").astype("float32"))


def test_unseen_category_encodes_as_zeros(transformed):
    pre = fraud_model.fit_preprocessing(_read(transformed)["train"])
    frame = _read(transformed)["test"].head(3).copy()
    frame["country"] = "ZZ"
    x = fraud_model.apply_preprocessing(frame, pre)
    cols = [i for i, f in enumerate(pre["features"]) if f.startswith("country=")]
    assert not x[:, cols].any()


# -- metrics ------------------------------------------------------------------------------------
def test_auc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    y = rng.random(300) < 0.2
    s = np.round(rng.random(300), 1)  # many ties
    pos, neg = s[y], s[~y]
    pairwise = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (len(pos) * len(neg))
    assert fraud_model.auc(y, s) == pytest.approx(pairwise, abs=1e-12)
    assert fraud_model.auc(y, y.astype(float)) == 1.0
    assert np.isnan(fraud_model.auc(np.zeros(5), np.arange(5)))


def test_precision_at_k():
    y = np.array([1, 0, 1, 0, 0, 1])
    s = np.array([0.9, 0.8, 0.7, 0.1, 0.2, 0.05])
    assert fraud_model.precision_at_k(y, s, k=2) == 0.5
    assert fraud_model.precision_at_k(y, s, k=3) == pytest.approx(2 / 3)
    assert fraud_model.precision_at_k(y, s, k=100) == 0.5  # k capped at the rows there are


# -- training: determinism, checkpoints, resume --------------------------------------------------
@pytest.fixture(scope="module")
def small_problem(transformed):
    splits = _read(transformed)
    pre = fraud_model.fit_preprocessing(splits["train"])
    train, valid = splits["train"].head(4000), splits["valid"].head(1500)
    return (
        fraud_model.apply_preprocessing(train, pre), train[fraud_data.LABEL].to_numpy(),
        fraud_model.apply_preprocessing(valid, pre), valid[fraud_data.LABEL].to_numpy(),
    )


PARAMS = TrainParams(hidden=16, epochs=3, batch_size=128)


def _weights(model) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _checkpointer(tmp_path: Path, key: str = "fraud-retrain/run/train") -> Checkpointer:
    return Checkpointer(LocalCheckpointStore(tmp_path / "ckpt"), key, keep=2)


def test_training_is_deterministic(small_problem):
    a, ha = fraud_model.fit(*small_problem, PARAMS)
    b, hb = fraud_model.fit(*small_problem, PARAMS)
    assert ha == hb
    for k, v in _weights(a).items():
        np.testing.assert_array_equal(v, _weights(b)[k])
    c, hc = fraud_model.fit(*small_problem, dataclasses.replace(PARAMS, seed=8))
    assert hc != ha


def test_a_retry_resumes_from_the_last_epoch_checkpoint_and_ends_identical(tmp_path, small_problem):
    reference, ref_history = fraud_model.fit(*small_problem, PARAMS)
    ckpt = _checkpointer(tmp_path)
    seen: list[int] = []

    def crash_after_two(epoch, record):
        seen.append(epoch)
        if epoch == 2:
            raise ConnectionResetError("simulated: node lost after epoch 2")

    with pytest.raises(ConnectionResetError):
        fraud_model.fit(*small_problem, PARAMS, checkpoint=ckpt, on_epoch_end=crash_after_two)
    assert ckpt.latest_step == 2
    assert [info.step for info in ckpt.store.list(ckpt.key)] == [1, 2]  # keep=2

    resumed, history = fraud_model.fit(*small_problem, PARAMS, checkpoint=ckpt, on_epoch_end=lambda e, r: seen.append(e))
    assert seen == [1, 2, 3]  # epochs 1-2 were not trained again
    assert history == ref_history
    for k, v in _weights(reference).items():
        np.testing.assert_array_equal(v, _weights(resumed)[k])
    # A checkpoint is numpy and JSON only: loading it needs no pickle.
    restored = ckpt.load()
    assert sorted(p.name for p in restored.iterdir()) == ["progress.json", "state.npz"]
    with np.load(restored / "state.npz", allow_pickle=False) as arrays:
        assert any(name.startswith("optim/") for name in arrays.files)


def test_a_checkpoint_of_another_config_is_not_resumed(tmp_path, small_problem):
    ckpt = _checkpointer(tmp_path)
    fraud_model.fit(*small_problem, dataclasses.replace(PARAMS, epochs=1, lr=0.01), checkpoint=ckpt)
    model, history = fraud_model.fit(*small_problem, PARAMS, checkpoint=ckpt)
    reference, ref_history = fraud_model.fit(*small_problem, PARAMS)
    assert history == ref_history
    assert len(history) == PARAMS.epochs


def test_micro_batches_keep_the_effective_batch(small_problem):
    # What the OOM remediation does: half the batch per pass, gradients accumulated.
    full, _ = fraud_model.fit(*small_problem, PARAMS)
    halves, _ = fraud_model.fit(*small_problem, PARAMS, micro_batch=PARAMS.batch_size // 2)
    for k, v in _weights(full).items():
        np.testing.assert_allclose(_weights(halves)[k], v, rtol=1e-4, atol=1e-5)


def test_model_directory_round_trip_without_pickle(tmp_path, small_problem, transformed):
    pre = fraud_model.fit_preprocessing(_read(transformed)["train"])
    model, history = fraud_model.fit(*small_problem, PARAMS)
    fraud_model.save_model_dir(model, pre, PARAMS, tmp_path / "model", history=history)
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == [
        "config.json", "preprocessing.json", "weights.npz",
    ]
    with np.load(tmp_path / "model" / "weights.npz", allow_pickle=False) as arrays:
        assert len(arrays.files) == 6  # three Linear layers, weight and bias each
    loaded, loaded_pre = fraud_model.load_model_dir(tmp_path / "model")
    test = _read(transformed)["test"]
    assert fraud_model.evaluate_model(loaded, loaded_pre, test) == fraud_model.evaluate_model(model, pre, test)


def test_training_picks_cuda_only_when_present():
    import torch

    assert fraud_model.pick_device() == ("cuda" if torch.cuda.is_available() else "cpu")


def test_train_step_resumes_through_the_runtime_shim_after_a_transient_failure(tmp_path, transformed, monkeypatch):
    """The real train step under the real shim: a TRANSIENT crash after epoch 2 is retried
    in-process, and the retry resumes from the epoch-2 checkpoint."""
    from interlock.core.run.runtime import execute_step
    from interlock.core.run.state import RunContext
    from reference_pipelines.fraud_retrain import train

    params = TrainParams(hidden=8, epochs=4, batch_size=512)
    real_fit = fraud_model.fit
    epochs_seen: list[list[int]] = []

    def flaky_fit(*args, on_epoch_end=None, **kwargs):
        attempt: list[int] = []
        epochs_seen.append(attempt)

        def hook(epoch, record):
            if on_epoch_end is not None:  # the step's own hook (curves, live progress) still runs
                on_epoch_end(epoch, record)
            attempt.append(epoch)
            if len(epochs_seen) == 1 and epoch == 2:
                raise ConnectionResetError("connection reset by peer (simulated, after epoch 2)")

        return real_fit(*args, on_epoch_end=hook, **kwargs)

    monkeypatch.setattr(fraud_model, "fit", flaky_fit)
    run = RunContext("fraud-retrain", "r-resume", "local", tmp_path / "state", sleeper=lambda s: None)
    result = execute_step(run, train.spec, "train", {"splits": transformed, "params": params})

    assert [a.status for a in result.attempts] == ["failed", "succeeded"]
    assert result.attempts[0].failure["kind"] == "TRANSIENT"
    assert epochs_seen == [[1, 2], [3, 4]]  # the retry trained only what was missing
    # The per-epoch curve (ctx.log_metric) has every epoch once, attempt 2 only the resumed ones.
    from interlock.core.run.metrics import read_points

    curve = [(p.step, p.attempt) for p in read_points(tmp_path / "state", "train") if p.name == "valid_auc"]
    assert curve == [(1, 1), (2, 1), (3, 2), (4, 2)]
    resumed, _ = fraud_model.load_model_dir(result.outputs["o0"].path)

    splits = _read(transformed)
    pre = json.loads((transformed / fraud_model.PREPROCESSING_FILE).read_text())
    monkeypatch.setattr(fraud_model, "fit", real_fit)
    reference, _ = fraud_model.fit(
        fraud_model.apply_preprocessing(splits["train"], pre), splits["train"][fraud_data.LABEL].to_numpy(),
        fraud_model.apply_preprocessing(splits["valid"], pre), splits["valid"][fraud_data.LABEL].to_numpy(),
        params,
    )
    for k, v in _weights(reference).items():
        np.testing.assert_array_equal(_weights(resumed)[k], v)


def test_a_model_directory_of_another_format_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "mlp", "n_features": 3, "params": {}}))
    with pytest.raises(ValueError, match="format None"):
        fraud_model.load_model_dir(tmp_path)


# -- where MLflow lives -----------------------------------------------------------------------------
def test_registry_parameter_wins_then_the_environment_then_the_run_directory(tmp_path, monkeypatch):
    from reference_pipelines.fraud_retrain import open_registry

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///" + str(tmp_path / "env" / "mlflow.db"))
    assert open_registry("mine").tracking_uri == f"sqlite:///{tmp_path / 'mine' / 'mlflow.db'}"
    assert open_registry("http://mlflow.example.com:5000").tracking_uri == "http://mlflow.example.com:5000"
    assert open_registry("").tracking_uri == "sqlite:///" + str(tmp_path / "env" / "mlflow.db")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    default = open_registry("")
    assert default.tracking_uri == f"sqlite:///{tmp_path / '.interlock' / 'mlflow' / 'mlflow.db'}"
    assert Path(default.tracking_uri[len("sqlite:///"):]).is_absolute()
