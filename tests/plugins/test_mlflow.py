"""The MLflow plugin against real MLflow 3 on a SQLite store under tmp_path.

Creating a SQLite store runs MLflow's alembic migrations (seconds), so the module shares
one store; every test uses its own experiment or model name.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.core.base.errors import InterlockError
from interlock.plugins.mlflow import (
    CHALLENGER,
    CHAMPION,
    PREVIOUS_CHAMPION,
    MlflowError,
    MlflowRegistry,
    ModelRegistry,
    RegistryError,
    describe_device,
    gpu_tags,
    receipt_tags,
    redact,
)

SHA = "3f5e2c1d9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e"
RECEIPT = {
    "pipeline": "fraud-retrain",
    "run_id": "fraud-retrain-20261101-0001",
    "backend": "flyte-local",
    "git_sha": SHA,
    "git_dirty": False,
    "snapshots": ["txn-2026-11-01"],
    "parameters": {"margin": 0.01},
    "steps": [
        {"name": "ingest", "image": "ghcr.io/acme/fraud@sha256:0a1b", "attempts": 1},
        {"name": "train", "image": "ghcr.io/acme/fraud@sha256:0a1b", "attempts": 2},
    ],
    "gpu_seconds": 5400.0,
}

# Credentials planted in a receipt, params and tags; none may reach MLflow.
SECRET_VALUES = [
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "hunter2-not-for-logs",
    "s3cr3t-db-pw",
    "ghp_" + "A1b2C3d4" * 5,
    "AKIAIOSFODNN7EXAMPLE",
    "sk-live-" + "q" * 30,
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for the module; $HOME and the cwd point at empty temp dirs."""
    root = tmp_path_factory.mktemp("mlflow")
    home, cwd = root / "home", root / "cwd"
    home.mkdir()
    cwd.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("INTERLOCK_HOME", str(root / "interlock-home"))  # the plugin's empty-store template
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")  # no phone-home, no ~/.config write
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.delenv("MLFLOW_REGISTRY_URI", raising=False)
        mp.chdir(cwd)
        yield {"dir": root / "store", "home": home, "cwd": cwd}


@pytest.fixture(scope="module")
def reg(store) -> MlflowRegistry:
    return MlflowRegistry(tracking_dir=store["dir"])


@pytest.fixture(scope="module")
def raw(store, reg):
    """An independent MlflowClient to read back what the plugin wrote."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{store['dir'] / 'mlflow.db'}"
    assert reg.tracking_uri == uri
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def _model_dir(tmp_path: Path, name: str, weights: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "weights.json").write_text(json.dumps({"w": weights}))
    (d / "MLmodel.txt").write_text("flavor: interlock-test\n")
    return d


def test_importing_the_plugin_does_not_import_mlflow():
    code = "import sys, interlock.plugins.mlflow; assert 'mlflow' not in sys.modules, 'eager'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_log_run_round_trip(reg, raw, store, tmp_path):
    model = _model_dir(tmp_path, "model", "v1")
    report = tmp_path / "eval.txt"
    report.write_text("auc=0.91\n")
    run_id = reg.log_run(
        "fraud-retrain",
        params={"lr": 0.05, "train": {"epochs": 3, "batch_size": 256}},
        metrics={"auc": 0.91, "logloss": 0.23},
        receipt=RECEIPT,
        artifacts={"model": model, "reports": report},
        run_name="nightly",
    )
    run = raw.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "nightly"
    assert run.data.params == {"lr": "0.05", "train.epochs": "3", "train.batch_size": "256"}
    assert run.data.metrics == {"auc": 0.91, "logloss": 0.23}
    assert reg.run_metrics(run_id) == {"auc": 0.91, "logloss": 0.23}
    tags = run.data.tags
    assert tags["interlock.run_id"] == RECEIPT["run_id"]
    assert tags["interlock.git_sha"] == SHA
    assert tags["interlock.git_dirty"] == "false"
    assert tags["interlock.snapshot"] == "txn-2026-11-01"
    assert tags["interlock.image"] == "ghcr.io/acme/fraud@sha256:0a1b"
    assert tags["interlock.backend"] == "flyte-local"
    assert tags["interlock.pipeline"] == "fraud-retrain"
    assert all(len(v) <= 250 for k, v in tags.items() if k.startswith("interlock."))
    assert not any(k.startswith("interlock.steps") for k in tags)  # too big for a tag

    # The receipt artifact is the whole receipt; artifacts live under <dir>/mlartifacts.
    assert run.info.artifact_uri.startswith((store["dir"] / "mlartifacts").as_uri())
    local = Path(raw.download_artifacts(run_id, "receipt.json", str(tmp_path / "dl")))
    assert json.loads(local.read_text()) == RECEIPT
    listed = {a.path for a in raw.list_artifacts(run_id)}
    assert listed == {"receipt.json", "model", "reports"}
    assert {a.path for a in raw.list_artifacts(run_id, "model")} == {
        "model/weights.json",
        "model/MLmodel.txt",
    }
    assert [a.path for a in raw.list_artifacts(run_id, "reports")] == ["reports/eval.txt"]


def test_secrets_never_reach_tags_params_or_the_receipt_artifact(reg, raw, tmp_path):
    receipt = {
        "run_id": "r-secret-1",
        "aws_secret_access_key": SECRET_VALUES[0],
        "storage": {"endpoint": "https://minio.local:9000", "password": SECRET_VALUES[1]},
        "feature_db": f"postgresql://ml:{SECRET_VALUES[2]}@db.local/features",
        "note": f"pushed with {SECRET_VALUES[3]}",
        "aws_key_id": SECRET_VALUES[4],
    }
    run_id = reg.log_run(
        "secrets",
        params={"lr": 0.1, "api_key": SECRET_VALUES[5], "s3": {"client_secret": SECRET_VALUES[1]}},
        metrics={"auc": 0.5},
        receipt=receipt,
        tags={"owner": "fraud-team", "session_token": SECRET_VALUES[0]},
    )
    run = raw.get_run(run_id)
    logged = {**run.data.tags, **run.data.params}
    text = json.dumps(logged)
    for secret in SECRET_VALUES:
        assert secret not in text
    assert not any("secret" in k or "password" in k or "api_key" in k for k in logged)
    # What is not a credential still arrives.
    assert run.data.tags["interlock.run_id"] == "r-secret-1"
    assert run.data.tags["interlock.storage.endpoint"] == "https://minio.local:9000"
    assert run.data.tags["owner"] == "fraud-team"
    assert run.data.params == {"lr": "0.1"}

    artifact = Path(raw.download_artifacts(run_id, "receipt.json", str(tmp_path))).read_text()
    for secret in SECRET_VALUES:
        assert secret not in artifact
    saved = json.loads(artifact)
    assert saved["run_id"] == "r-secret-1"
    assert saved["storage"] == {
        "endpoint": "https://minio.local:9000",
        "password": "***redacted***",
    }
    # The one redactor (core/run/redact.py) masks a URL's credentials and keeps its host, as receipts do.
    assert saved["feature_db"] == "postgresql://***redacted***@db.local/features"


def test_champion_is_none_on_an_empty_registry(reg):
    assert reg.champion("never-registered") is None
    assert reg.aliases("never-registered") == {}


def test_register_two_versions_and_promote(reg, raw, tmp_path):
    name = "fraud-detector"
    assert isinstance(reg, ModelRegistry)
    run_id = reg.log_run("fraud-retrain", metrics={"auc": 0.90}, receipt=RECEIPT)
    v1 = reg.register(name, _model_dir(tmp_path, "m1", "one"), run_id=run_id, receipt=RECEIPT)
    # As gpu_tags() returns it on an H200 training node (it is tested on its own below).
    gpu = {
        "precision": "bf16",
        "minimum_vram_gb": "40",
        "gpu_architecture": "Hopper",
        "cuda_version": "12.8",
        "compute_capability": "9.0",
    }
    v2 = reg.register(
        name,
        _model_dir(tmp_path, "m2", "two"),
        run_id=run_id,
        receipt=RECEIPT,
        gpu=gpu,
        tags={"team": "fraud", "registry_token": SECRET_VALUES[3]},
        artifact_path="model-v2",
    )
    assert (v1, v2) == ("1", "2")
    assert reg.champion(name) is None  # registered, not promoted

    mv1, mv2 = raw.get_model_version(name, v1), raw.get_model_version(name, v2)
    assert mv1.run_id == run_id and mv1.source.endswith("/model")
    assert mv1.tags["interlock.git_sha"] == SHA
    assert mv1.tags["interlock.run_id"] == RECEIPT["run_id"]
    assert "gpu_architecture" not in mv1.tags
    assert {k: mv2.tags[k] for k in gpu} == gpu
    assert mv2.tags["team"] == "fraud" and "registry_token" not in mv2.tags
    # The version's files were copied into the run: the temp dir can go away.
    got = reg.download(name, v2, tmp_path / "fetched")
    assert json.loads((got / "weights.json").read_text()) == {"w": "two"}

    assert reg.promote(name, v1) is None
    assert reg.champion(name) == v1
    reg.set_challenger(name, v2)
    assert str(raw.get_model_version_by_alias(name, CHALLENGER).version) == v2

    assert reg.promote(name, v2) == v1
    assert str(raw.get_model_version_by_alias(name, CHAMPION).version) == v2
    assert str(raw.get_model_version_by_alias(name, PREVIOUS_CHAMPION).version) == v1
    assert reg.aliases(name) == {CHAMPION: v2, PREVIOUS_CHAMPION: v1}  # challenger consumed
    info = reg.describe(name, v2)
    assert info.tags["interlock.promoted_from"] == v1 and "interlock.promoted_at" in info.tags
    # The replaced champion is kept, untouched and loadable.
    assert raw.get_model_version(name, v1).status == "READY"
    assert json.loads((reg.download(name, v1, tmp_path / "old") / "weights.json").read_text()) == {
        "w": "one"
    }
    assert reg.promote(name, v2) == v2  # idempotent: nothing moves
    assert reg.aliases(name)[PREVIOUS_CHAMPION] == v1

    assert reg.rollback(name) == v1
    assert reg.aliases(name) == {CHAMPION: v1, PREVIOUS_CHAMPION: v2}


def test_register_a_run_artifact_uri_without_copying(reg, raw, tmp_path):
    run_id = reg.log_run("fraud-retrain", artifacts={"model": _model_dir(tmp_path, "m", "uri")})
    version = reg.register("from-uri", f"runs:/{run_id}/model", run_id=run_id)
    mv = raw.get_model_version("from-uri", version)
    assert mv.source == f"runs:/{run_id}/model"
    got = reg.download("from-uri", version, tmp_path / "dl")
    assert json.loads((got / "weights.json").read_text()) == {"w": "uri"}


def test_dataclass_params_are_flattened(reg, raw):
    @dataclasses.dataclass
    class TrainParams:
        lr: float = 0.01
        layers: list = dataclasses.field(default_factory=lambda: [64, 32])

    run_id = reg.log_run("fraud-retrain", params=TrainParams())
    assert raw.get_run(run_id).data.params == {"lr": "0.01", "layers": "[64, 32]"}


def test_mlflow_failures_become_interlock_errors(reg, tmp_path):
    reg.register("wrapped", _model_dir(tmp_path, "m", "x"), run_id=reg.log_run("wrapped"))
    with pytest.raises(RegistryError) as info:
        reg.promote("wrapped", 99)
    err = info.value
    assert isinstance(err, InterlockError) and err.code == "MLFLOW_REGISTRY"
    assert err.mlflow_code == "RESOURCE_DOES_NOT_EXIST" and not err.retryable
    assert type(err.__cause__).__name__ == "MlflowException"
    assert "'wrapped' version 99" in str(err)
    assert reg.champion("wrapped") is None  # nothing moved
    with pytest.raises(RegistryError, match="no 'previous-champion'"):
        reg.rollback("wrapped")
    with pytest.raises(RegistryError, match="does not exist"):
        reg.register("wrapped", tmp_path / "no-such-dir", run_id=None)


def test_no_store_configured_is_refused(store, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(MlflowError, match="no MLflow store configured") as info:
        MlflowRegistry()
    assert "MLFLOW_TRACKING_URI" in str(info.value)


def test_mlflow_tracking_uri_is_honoured(store, reg, raw, monkeypatch, tmp_path):
    # Point the env at the module's store; tracking_dir names another place, which must
    # stay unused (a second store would cost another migration, so reuse the first).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", reg.tracking_uri)
    elsewhere = tmp_path / "unused"
    env_reg = MlflowRegistry(tracking_dir=elsewhere)
    assert env_reg.tracking_uri == reg.tracking_uri
    run_id = env_reg.log_run("env-honoured", metrics={"auc": 0.7})
    assert raw.get_run(run_id).data.metrics == {"auc": 0.7}
    assert not elsewhere.exists()
    # An explicit tracking_uri wins over the environment.
    explicit = MlflowRegistry(tracking_uri="sqlite:///" + str(tmp_path / "other.db"))
    assert explicit.tracking_uri.endswith("/other.db")


def test_receipt_tags_and_redaction_are_plain_data():
    nested = {
        "git": {"sha": SHA, "dirty": True},
        "images": {"train": "img@sha256:1", "eval": "img@sha256:2"},
    }
    tags = receipt_tags(nested)
    assert tags["interlock.git_sha"] == SHA and tags["interlock.git_dirty"] == "true"
    assert tags["interlock.image"] == "train=img@sha256:1,eval=img@sha256:2"
    assert receipt_tags(None) == {}
    long = receipt_tags({"note": "x" * 1000})["interlock.note"]
    assert len(long) == 250 and long.endswith("...")
    assert redact({"a": [{"token": "abc"}], "b": "ok"}) == {
        "a": [{"token": "***redacted***"}],
        "b": "ok",
    }
    # Words that merely contain a credential word are kept.
    assert set(receipt_tags({"author": "ana", "max_tokens": 5})) == {
        "interlock.author",
        "interlock.max_tokens",
    }


def test_gpu_tags_on_cpu_return_only_explicit_values():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the CPU contract is tested on CPU runners")
    assert gpu_tags() == {}
    assert gpu_tags(precision="fp32", compute_capability="8.0") == {
        "precision": "fp32",
        "compute_capability": "8.0",
    }
    assert gpu_tags(
        precision="bf16",
        minimum_vram_gb=40,
        gpu_architecture="Hopper",
        cuda_version="12.8",
        compute_capability="9.0",
    ) == {
        "precision": "bf16",
        "minimum_vram_gb": "40",
        "gpu_architecture": "Hopper",
        "cuda_version": "12.8",
        "compute_capability": "9.0",
    }


def test_describe_device_from_torch_figures():
    # The figures torch.cuda reports for one H200 after a run that reserved 37.2 GiB at peak.
    facts = describe_device(
        name="NVIDIA H200",
        major=9,
        minor=0,
        total_memory=150_754_820_096,
        cuda_version="12.8",
        device_count=8,
        peak_reserved=int(37.2 * 2**30),
    )
    assert facts == {
        "gpu_name": "NVIDIA H200",
        "gpu_count": 8,
        "gpu_memory_gb": 140.4,
        "gpu_architecture": "Hopper",
        "compute_capability": "9.0",
        "cuda_version": "12.8",
        "minimum_vram_gb": 38,
    }
    unknown = describe_device(name="x", major=13, minor=2, total_memory=2**30, cuda_version=None)
    assert unknown["gpu_architecture"] == "sm_132" and "minimum_vram_gb" not in unknown


def test_nothing_was_written_outside_the_store(store, reg, tmp_path):
    # MLflow must not have fallen back to ./mlruns or $HOME. Under xdist this test may run on a
    # worker where no other test of the module wrote, so it writes a run and a version itself.
    run_id = reg.log_run("outside-check", metrics={"auc": 0.5}, artifacts={"model": _model_dir(tmp_path, "m", "o")})
    reg.register("outside-check", f"runs:/{run_id}/model", run_id=run_id)
    assert not (store["cwd"] / "mlruns").exists()
    assert list(store["cwd"].iterdir()) == []
    assert list(store["home"].iterdir()) == []
    assert not (Path(os.getcwd()) / "mlruns").exists()
    assert (store["dir"] / "mlflow.db").is_file() and (store["dir"] / "mlartifacts").is_dir()
