"""Receipts of local runs: identity, code version, parameters (redacted), data snapshots,
cache hits, attempts with failure kinds, durations, resources, GPU-seconds and cost."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from core_pipelines import receipts

import interlock as il
from interlock.core.record.receipt import DEFAULT_PRICES, PriceTable, git_info, redact

SECRET = "hunter2-very-secret"


def read(path: Path | None) -> dict[str, Any]:
    assert path is not None
    return json.loads(Path(path).read_text())


def step_entry(receipt: dict[str, Any], node: str) -> dict[str, Any]:
    return next(s for s in receipt["steps"] if s["node"] == node)


@pytest.fixture
def prices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    table = {"gpu_hour:nvidia-h200": 36000.0, "cpu_core_hour": 0.0, "memory_gib_hour": 0.0}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv("INTERLOCK_PRICES", str(path))
    return table


def test_receipt_of_a_local_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prices: dict[str, float]) -> None:
    monkeypatch.setenv("INTERLOCK_GIT_SHA", "0123456789abcdef0123456789abcdef01234567")
    monkeypatch.setenv("INTERLOCK_GIT_DIRTY", "1")
    workdir = tmp_path / "wd"
    marker = str(tmp_path / "flaky")
    first = il.run(receipts.receipt_demo, backend="local", workdir=workdir, run_id="r-first", flaky_marker=marker)
    second = il.run(receipts.receipt_demo, backend="local", workdir=workdir, run_id="r-second", flaky_marker=marker)
    assert first.outputs == second.outputs == {"o0": 0.6}

    text = Path(first.receipt_path).read_text()
    receipt = json.loads(text)
    assert first.receipt_path == workdir / "runs" / "r-first" / "state" / "receipt.json"
    assert receipt["receipt_version"] == 1
    assert (receipt["pipeline"], receipt["run_id"], receipt["backend"], receipt["status"]) == (
        "receipt-demo", "r-first", "local", "succeeded",
    )
    assert receipt["pipeline_ref"] == "core_pipelines.receipts:receipt_demo"
    assert receipt["git"] == {"sha": "0123456789abcdef0123456789abcdef01234567", "dirty": True}

    # Parameters, with secrets masked and URL credentials stripped; the value appears nowhere.
    params = receipt["parameters"]
    assert params["snapshot"] == "snap-2026-11-01" and params["flaky_marker"] == marker
    assert params["api_token"] == "***"
    assert params["db_url"] == "postgresql://***@db.internal:5432/features"
    assert SECRET not in text and "pa55word" not in text

    assert receipt["snapshots"] == [
        {"id": "snap-2026-11-01", "uri": "s3://lake/events/snap-2026-11-01", "rows": 3, "node": "load"}
    ]
    assert receipt["cache_hits"] == []

    train = step_entry(receipt, "train")
    assert train["status"] == "succeeded" and train["cached"] is False
    assert [a["status"] for a in train["attempts"]] == ["failed", "succeeded"]
    assert train["attempts"][0]["failure"]["kind"] == "TRANSIENT"
    assert train["failure_kinds"] == ["TRANSIENT"]
    assert train["duration_s"] >= 0.1  # two attempts of at least 50 ms each
    assert train["duration_s"] == pytest.approx(sum(a["duration_s"] for a in train["attempts"]), abs=1e-5)
    assert train["resources"] == {"cpu": "2", "memory": "1Gi", "gpu": 1, "accelerator": "nvidia-h200"}
    assert train["image"] == receipts.train.spec.image and train["digest"] == receipts.DIGEST
    assert train["fingerprint"] == receipts.train.spec.fingerprint
    assert train["facts"] == {"precision": "bf16"}
    assert train["gpu_seconds"] == pytest.approx(train["duration_s"], abs=1e-3)
    # 36000 USD per GPU-hour = 10 USD per GPU-second; CPU and memory are free in this table.
    assert train["estimated_cost_usd"] == pytest.approx(10 * train["duration_s"], rel=1e-3, abs=1e-5)
    assert receipt["totals"]["estimated_cost_usd"] == pytest.approx(
        sum(s["estimated_cost_usd"] for s in receipt["steps"]), abs=1e-5
    )
    assert receipt["totals"]["gpu_seconds"] == pytest.approx(train["gpu_seconds"], abs=1e-3)
    assert step_entry(receipt, "load")["gpu_seconds"] == 0.0

    # The second run: featurize served from cache, and the flaky step succeeded at once.
    again = read(second.receipt_path)
    assert again["run_id"] == "r-second"
    assert again["cache_hits"] == ["featurize"]
    feat = step_entry(again, "featurize")
    assert feat["cached"] is True and feat["status"] == "cached" and feat["attempts"] == []
    assert step_entry(again, "train")["failure_kinds"] == []
    assert second.steps["featurize"].cached is True


PIPELINE_IN_REPO = """
import interlock as il


@il.step
def one(x: int) -> int:
    return x + 1


@il.pipeline(name="in-repo")
def in_repo(x: int = 1):
    return one(x=x)
"""


def test_git_describes_the_pipelines_repository_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interlock.core.dsl.loader import load_pipeline

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]

    def make_repo(path: Path) -> str:
        path.mkdir()
        subprocess.run([*git, "init", "-q"], cwd=path, check=True)
        (path / "README").write_text("r\n")
        subprocess.run([*git, "add", "README"], cwd=path, check=True)
        subprocess.run([*git, "commit", "-q", "-m", "init"], cwd=path, check=True)
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True,
                              text=True).stdout.strip()

    code, elsewhere = tmp_path / "code", tmp_path / "elsewhere"
    code_sha, other_sha = make_repo(code), make_repo(elsewhere)
    module = f"in_repo_{tmp_path.name.replace('-', '_')}"
    source = code / f"{module}.py"
    source.write_text(PIPELINE_IN_REPO)
    pipe = load_pipeline(str(source))
    monkeypatch.chdir(elsewhere)  # a clean checkout of another repository

    def receipt_git() -> dict:
        run = il.run(pipe, backend="local", workdir=tmp_path / "wd", cache=False)
        return read(run.receipt_path)["git"]

    assert receipt_git() == {"sha": code_sha, "dirty": True}  # the pipeline file is untracked
    subprocess.run([*git, "add", source.name], cwd=code, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "pipeline"], cwd=code, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=code, check=True, capture_output=True,
                          text=True).stdout.strip()
    assert head != other_sha
    assert receipt_git() == {"sha": head, "dirty": False}
    source.write_text(PIPELINE_IN_REPO + "\n# edited\n")  # an uncommitted change to the pipeline
    assert receipt_git() == {"sha": head, "dirty": True}
    assert git_info(code) == {"sha": head, "dirty": True}
    assert git_info(tmp_path / "wd") == {"sha": None, "dirty": None}  # not a repository


def test_failed_run_raises_step_failed_with_the_receipt(tmp_path: Path) -> None:
    with pytest.raises(il.StepFailed) as info:
        il.run(receipts.receipt_failing, backend="local", workdir=tmp_path, run_id="r-fail")
    err = info.value
    assert err.step == "reject" and err.kind == "FATAL"
    assert "data validation failed" in err.reason
    assert err.hint == "check the feature pipeline"
    assert err.receipt_path and str(err) .count("receipt:") == 1 and err.receipt_path in str(err)
    receipt = read(Path(err.receipt_path))
    assert receipt["status"] == "failed"
    assert step_entry(receipt, "reject")["failure_kinds"] == ["FATAL"]
    assert step_entry(receipt, "publish")["status"] == "not-run"

    result = il.run(receipts.receipt_failing, backend="local", workdir=tmp_path, raise_on_failure=False)
    assert result.status == "failed" and result.outputs == {}
    assert result.steps["reject"].failure["kind"] == "FATAL"


def test_dataclass_parameters_are_recorded_as_json_and_redacted(tmp_path: Path) -> None:
    # Regression: a dataclass parameter was recorded as its repr, secrets in its fields included.
    default = il.run(receipts.receipt_config, backend="local", workdir=tmp_path)
    given = il.run(
        receipts.receipt_config, backend="local", workdir=tmp_path,
        conn=receipts.Connection(host="replica", retries=5),
    )
    from_json = il.run(receipts.receipt_config, backend="local", workdir=tmp_path, conn={"host": "h2", "password": "p"})
    assert (default.outputs, given.outputs, from_json.outputs) == ({"o0": "db.internal:3"}, {"o0": "replica:5"}, {"o0": "h2:3"})
    for run, host in ((default, "db.internal"), (given, "replica")):
        text = Path(run.receipt_path).read_text()
        assert json.loads(text)["parameters"]["conn"] == {
            "host": host, "password": "***", "dsn": "postgresql://***@db.internal/features",
            "retries": 3 if host == "db.internal" else 5,
        }
        assert "field-secret-42" not in text and "dsn-secret-7" not in text
    assert read(from_json.receipt_path)["parameters"]["conn"] == {"host": "h2", "password": "***"}


def test_redaction_rules() -> None:
    out = redact({
        "password": "p", "API_KEY": "k", "aws_secret_access_key": "s", "hf-token": "t",
        "url": "https://user:pw@host/x", "plain": "https://host/x", "n": 3,
        "nested": {"db": {"token": "t", "urls": ["s3://k:s@b/p"]}},
    })
    assert out == {
        "password": "***", "API_KEY": "***", "aws_secret_access_key": "***", "hf-token": "***",
        "url": "https://***@host/x", "plain": "https://host/x", "n": 3,
        "nested": {"db": {"token": "***", "urls": ["s3://***@b/p"]}},
    }


def test_price_table_estimates(tmp_path: Path) -> None:
    table = PriceTable.load()
    assert table.prices == DEFAULT_PRICES
    hour = table.estimate({"cpu": "4", "memory": "16Gi", "accelerator": "nvidia-h200"}, 3600, gpus=2, interruptible=False)
    assert hour == pytest.approx(4 * 0.04 + 16 * 0.005 + 2 * 8.00)
    spot = table.estimate({"cpu": "4", "memory": "16Gi", "accelerator": "nvidia-h200"}, 3600, gpus=2, interruptible=True)
    assert spot == pytest.approx(hour * (1 - 0.65))
    assert table.gpu_hour("unknown-gpu") == DEFAULT_PRICES["gpu_hour:default"]
    custom = tmp_path / "p.json"
    custom.write_text(json.dumps({"gpu_hour:default": 1.0}))
    assert PriceTable.load(str(custom)).gpu_hour("unknown-gpu") == 1.0


def test_a_fragment_of_another_run_stays_out_of_the_receipt(tmp_path: Path) -> None:
    # A state directory shared by runs (a KFP state PVC) holds fragments of earlier runs.
    from interlock.core.record.receipt import assemble_receipt

    spec = il.spec(receipts.receipt_failing)
    state = tmp_path / "state"
    (state / "receipts").mkdir(parents=True)
    stale = {"run_id": "r-old", "status": "failed", "attempts": [
        {"number": 1, "duration_s": 5.0, "status": "failed", "failure": {"kind": "FATAL", "reason": "old"}},
    ], "facts": {"old": True}}
    (state / "receipts" / "publish.json").write_text(json.dumps(stale))
    path = assemble_receipt(
        spec, run_id="r-new", backend="local", state_dir=state, params={}, status="failed",
        statuses={"reject": "failed", "publish": "not-run"}, started=0.0,
    )
    publish = step_entry(read(path), "publish")
    assert publish["attempts"] == [] and publish["failure_kinds"] == [] and publish["facts"] == {}
    assert publish["duration_s"] == 0


def test_a_cache_hit_keeps_the_snapshot_it_stands_on(tmp_path: Path) -> None:
    from core_pipelines import snapshots

    first = il.run(snapshots.snapshots, backend="local", workdir=tmp_path, run_id="r-one")
    second = il.run(snapshots.snapshots, backend="local", workdir=tmp_path, run_id="r-two")
    assert second.steps["load"].status == "cached"
    again = read(second.receipt_path)
    assert again["cache_hits"] == ["load"]
    assert again["snapshots"] == [{"id": "snap-1", "rows": 42, "node": "load"}]
    load = step_entry(again, "load")
    assert load["attempts"] == [] and load["facts"]["cached_from_run"] == "r-one"
    assert read(first.receipt_path)["snapshots"] == again["snapshots"]
