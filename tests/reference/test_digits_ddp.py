"""digits-ddp: two data-parallel ranks (gloo, CPU) on scikit-learn's bundled digits.

Each run has its own MLflow registry (SQLite in the test's directory): a first run promotes
its model, a second one with the same data keeps the champion.

The same metrics on local (local rank processes), flyte-local (torch elastic) and kfp-local
(the KFP launcher's local ranks); it compiles for both clusters; and a rank killed mid-training (SIGKILL, no chance to
checkpoint) costs at most one checkpoint interval: KFP retries the step, the ranks resume from
the last committed checkpoint, and the model ends bitwise equal to an uninterrupted run's.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import interlock as il
from interlock.adapters.flyte.backend import FlyteLocalOptions
from interlock.core.backend.protocol import RunOptions, get_backend, resolve_params
from reference_pipelines.digits_ddp import digits_ddp

SPEC = il.spec(digits_ddp)


def run(backend: str, workdir: Path, run_id: str, registry: Path | None = None, **kw: Any) -> il.RunResult:
    options = RunOptions(run_id=run_id, workdir=workdir, sleeper=lambda s: None, **kw)
    params = resolve_params(SPEC, {"registry": str(registry or workdir / "mlflow")})
    return get_backend(backend).run(SPEC, params, options)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def kfp_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kfp-registry")


@pytest.fixture(scope="module")
def kfp_run(tmp_path_factory: pytest.TempPathFactory, kfp_registry: Path) -> il.RunResult:
    result = run("kfp-local", tmp_path_factory.mktemp("kfp"), "digits-kfp", registry=kfp_registry)
    assert result.status == "succeeded", result.error
    return result


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A moto S3 server on loopback; dummy credentials in the env the rank processes inherit."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    for var, value in {"AWS_ACCESS_KEY_ID": "digits-test", "AWS_SECRET_ACCESS_KEY": "digits-test-secret",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                       "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
                       "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
                       "INTERLOCK_S3_ENDPOINT_URL": f"http://{host}:{port}"}.items():
        monkeypatch.setenv(var, value)
    import boto3

    boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket="ckpt")
    try:
        yield "ckpt"
    finally:
        server.stop()


def test_trains_to_a_useful_model(kfp_run: il.RunResult) -> None:
    metrics = dict(kfp_run["challenger"])
    assert metrics["accuracy"] > 0.85
    assert kfp_run.steps["train"].status is il.Status.SUCCEEDED
    # A fresh registry: no champion yet, so the model is registered and becomes champion.
    assert kfp_run["promoted"] is True and kfp_run["champion_before"] == "none"
    assert kfp_run.steps["register"].status is il.Status.SUCCEEDED


@pytest.mark.slow
def test_flyte_local_gives_the_same_metrics(kfp_run: il.RunResult, tmp_path: Path) -> None:
    flyte = run("flyte-local", tmp_path, "digits-flyte", backend_options=FlyteLocalOptions(spawn=False))
    assert flyte.status == "succeeded", flyte.error
    assert dict(flyte["challenger"]) == dict(kfp_run["challenger"])  # exactly: deterministic on CPU


def test_local_gives_the_same_metrics(kfp_run: il.RunResult, kfp_registry: Path, tmp_path: Path,
                                      s3_bucket: str) -> None:
    """`local` runs the distributed step as two local gloo ranks, bitwise like kfp-local, with
    its checkpoints in S3 (rank 0 writes, every rank restores), against kfp-local's registry."""
    import boto3

    from interlock.plugins.mlflow import MlflowRegistry
    from reference_pipelines.digits_ddp import MODEL_NAME

    assert "unsupported" not in get_backend("local").capabilities().features["distributed"]
    local = run("local", tmp_path, "digits-local", registry=kfp_registry,
                checkpoint_store=f"s3://{s3_bucket}/runs")
    assert local.status == "succeeded", local.error
    assert dict(local["challenger"]) == dict(kfp_run["challenger"])  # exactly: deterministic on CPU
    # The same model is no better than itself: nothing registered, the champion untouched.
    assert local["promoted"] is False and local["champion_before"] == "1"
    assert local.steps["register"].status is il.Status.SKIPPED
    registry = MlflowRegistry(tracking_uri=f"sqlite:///{kfp_registry / 'mlflow.db'}")
    assert registry.champion(MODEL_NAME) == "1"
    assert len(registry.client.search_model_versions(f"name='{MODEL_NAME}'")) == 1
    # Checkpoints went to the bucket (every 20 steps), none to the run's own folder.
    client = boto3.client("s3", endpoint_url=os.environ["INTERLOCK_S3_ENDPOINT_URL"])
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket, Prefix="runs/").get("Contents", [])]
    assert any("train" in k for k in keys), keys
    assert not list((tmp_path / "runs" / "digits-local" / "state" / "checkpoints").rglob("*.json"))
    import json

    receipt = json.loads(Path(local.receipt_path or "").read_text())
    train = next(s for s in receipt["steps"] if s["node"] == "train")
    assert train["status"] == "succeeded" and len(train["attempts"]) == 1
    assert train["facts"]["ranks"] == 2 and train["facts"]["resumed_from_step"] == 0


def test_compiles_for_both_clusters(tmp_path: Path) -> None:
    store = "s3://ckpt/digits"  # the run-level checkpoint store reaches every task container's env
    [ir] = il.compile(digits_ddp, backend="kfp", out=tmp_path / "kfp.yaml", state_pvc="interlock-state",
                      image="reg/digits:1", checkpoint_store=store)
    assert "launch_node(" in Path(ir).read_text()
    docs = list(yaml.safe_load_all(Path(ir).read_text()))
    executors = docs[0]["deploymentSpec"]["executors"]
    envs = {name: {e["name"]: e["value"] for e in ex["container"].get("env", [])} for name, ex in executors.items()}
    steps = {f"exec-{n.name.replace('_', '-')}" for n in SPEC.nodes}
    assert steps <= set(envs) and all(envs[e].get("INTERLOCK_CHECKPOINT_ROOT") == store for e in steps)
    files = il.compile(digits_ddp, backend="flyte", out=tmp_path / "flyte", project="p", domain="d", version="v1",
                       image="reg/digits:1", checkpoint_store=store)
    [train_pb] = [f for f in files if str(f).endswith("_digits-ddp.train_1.pb")]
    from flyteidl.admin.task_pb2 import TaskSpec

    task = TaskSpec.FromString(Path(train_pb).read_bytes())
    env = {kv.key: kv.value for kv in task.template.container.env}
    assert env["INTERLOCK_CHECKPOINT_ROOT"] == store


def _rank_pids(run_id: str, rank: int) -> list[int]:
    """This run's rank processes (Linux /proc): the launcher's children that run the rank module."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"interlock.adapters.kfp.rank" in cmd and f"RANK={rank}".encode() in env \
                and f"INTERLOCK_RUN_ID={run_id}".encode() in env:
            pids.append(int(entry.name))
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the rank process through /proc")
def test_sigkill_of_one_rank_resumes_from_the_last_checkpoint(kfp_run: il.RunResult, tmp_path: Path) -> None:
    run_id = "digits-kill"
    checkpoints = tmp_path / "runs" / run_id / "state" / "checkpoints"
    killed: list[int] = []

    def reclaim() -> None:  # the node under rank 1 goes away right after the first checkpoint
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed:
            if any(checkpoints.rglob("*.json")):
                for pid in _rank_pids(run_id, 1):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.05)

    watcher = threading.Thread(target=reclaim, daemon=True)
    watcher.start()
    result = run("kfp-local", tmp_path, run_id)
    watcher.join(timeout=5)
    assert killed, "rank 1 was never seen running"
    assert result.status == "succeeded", result.error
    # Bitwise: the resumed run ends with exactly the uninterrupted run's model.
    assert dict(result["challenger"]) == dict(kfp_run["challenger"])
    import json

    receipt = json.loads(Path(result.receipt_path or "").read_text())
    train = next(s for s in receipt["steps"] if s["node"] == "train")
    kinds = [a["failure"]["kind"] for a in train["attempts"] if a.get("failure")]
    assert kinds == ["PREEMPTED"]
    # The retry resumed at a committed checkpoint: at most one interval (20 steps) was lost.
    assert train["facts"]["resumed_from_step"] >= 20


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the rank process through /proc")
def test_sigterm_of_one_rank_checkpoints_and_resumes_bitwise(
    kfp_run: il.RunResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spot reclaim of rank 1's node mid-epoch: the group checkpoints, the step ends PREEMPTED,
    KFP retries it, the ranks resume from that checkpoint and the model is the uninterrupted one."""
    from interlock.core.run.env import EnvName

    monkeypatch.setenv(EnvName.ON_CLUSTER, "1")  # as a cluster pod's ranks: SIGTERM is a reclaim there
    run_id = "digits-term"
    checkpoints = tmp_path / "runs" / run_id / "state" / "checkpoints"
    termed: list[int] = []

    def reclaim() -> None:  # once training is under way (the first checkpoint, step 20 of epoch 0)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not termed:
            if any(checkpoints.rglob("*.json")):
                for pid in _rank_pids(run_id, 1):
                    os.kill(pid, signal.SIGTERM)
                    termed.append(pid)
            time.sleep(0.05)

    watcher = threading.Thread(target=reclaim, daemon=True)
    watcher.start()
    result = run("kfp-local", tmp_path, run_id)
    watcher.join(timeout=5)
    assert termed, "rank 1 was never seen running"
    assert result.status == "succeeded", result.error
    assert dict(result["challenger"]) == dict(kfp_run["challenger"])  # bitwise: deterministic on CPU
    import json

    receipt = json.loads(Path(result.receipt_path or "").read_text())
    train = next(s for s in receipt["steps"] if s["node"] == "train")
    failures = [a["failure"] for a in train["attempts"] if a.get("failure")]
    assert [f["kind"] for f in failures] == ["PREEMPTED"]
    assert "rank 1" in failures[0]["reason"] and "SIGTERM" in failures[0]["reason"]
    # The retry resumed from exactly the checkpoint committed when the SIGTERM was handled (the
    # one it forced, or the step-20 one when the signal landed during that save), never from 0.
    import re

    found = re.search(r"resumes from step (\d+)", failures[0]["message"])  # the rank's own words
    assert found, failures[0]
    announced = int(found.group(1))
    assert train["facts"]["resumed_from_step"] == announced >= 20
