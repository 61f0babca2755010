"""The `flyte-local` backend: flytekit's local execution plus the shim (retries, timeouts,
checkpoint restore, receipts) and flytekit's cache kept inside interlock's work directory."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
import time
from pathlib import Path

import pytest
from flyte_pipelines.basic import demo
from flyte_pipelines.faults import (
    broken_pipeline,
    flaky_pipeline,
    resume_pipeline,
    slow_pipeline,
    stopped_pipeline,
)

import interlock as il

CACHED_STEPS = {"ingest", "split", "train", "evaluate"}


def _statuses(result: il.RunResult) -> dict[str, str]:
    return {k: v.status for k, v in result.steps.items()}


def test_runs_typed_pipeline_through_flytekit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    registry = tmp_path / "registry.txt"
    monkeypatch.setenv("INTERLOCK_TEST_REGISTRY", str(registry))
    result = il.run(demo, backend="flyte-local", workdir=tmp_path / "work", snapshot="s1")

    assert result.status == "succeeded"
    metrics = result.outputs["o0"]
    assert isinstance(metrics, il.Metrics)
    assert metrics["auc"] == pytest.approx(0.53)
    assert set(_statuses(result).values()) == {"succeeded"}
    assert registry.read_text().splitlines() == ["registered lr=0.1 auc=0.53", "notify registered lr=0.1 auc=0.53"]
    receipt = json.loads(Path(result.receipt_path).read_text())
    assert receipt["backend"] == "flyte-local" and receipt["status"] == "succeeded"
    assert [s["node"] for s in receipt["steps"]] == [n.name for n in demo.spec.nodes]
    assert receipt["parameters"]["snapshot"] == "s1"
    # flytekit's cache and blobs live in the work directory, never under $HOME.
    assert any((tmp_path / "work" / "cache" / "flyte").iterdir())
    assert not (isolated_home / ".flyte").exists()


def test_second_run_is_served_from_cache(tmp_path: Path) -> None:
    work = tmp_path / "work"
    first = il.run(demo, backend="flyte-local", workdir=work, snapshot="s2")
    second = il.run(demo, backend="flyte-local", workdir=work, snapshot="s2")

    assert {n for n, s in _statuses(first).items() if s == "cached"} == set()
    assert {n for n, s in _statuses(second).items() if s == "cached"} == CACHED_STEPS
    assert all(second.steps[n].status == "succeeded" for n in ("decide", "register", "notify"))  # not cached
    assert second.outputs["o0"] == first.outputs["o0"]
    receipt = json.loads(Path(second.receipt_path).read_text())
    assert sorted(receipt["cache_hits"]) == sorted(CACHED_STEPS)
    # Another input is another key: the first step runs again.
    third = il.run(demo, backend="flyte-local", workdir=work, snapshot="s3")
    assert third.steps["ingest"].status == "succeeded"
    # cache=False ignores the cache entirely.
    fourth = il.run(demo, backend="flyte-local", workdir=work, snapshot="s2", cache=False)
    assert "cached" not in _statuses(fourth).values()


def test_closed_gate_skips_its_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = tmp_path / "registry.txt"
    monkeypatch.setenv("INTERLOCK_TEST_REGISTRY", str(registry))
    result = il.run(demo, backend="flyte-local", workdir=tmp_path / "work", threshold=0.9)
    assert result.status == "succeeded"
    assert result.steps["decide"].status == "succeeded"
    assert result.steps["register"].status == "skipped" and result.steps["notify"].status == "skipped"
    assert not registry.exists()


_CHANGE_SRC = '''
import pandas as pd

import interlock as il

@il.step(cache=il.Cache())
def a(x: int) -> pd.DataFrame:
    {a_comment}
    return pd.DataFrame({{"v": [x, x + 1]}})

@il.step(cache=il.Cache())
def b(frame: pd.DataFrame) -> pd.DataFrame:
    return frame * {factor}

@il.step(cache=il.Cache())
def c(frame: pd.DataFrame) -> str:
    return f"c={{frame['v'].sum()}}"

@il.step(cache=il.Cache())
def d(x: int) -> int:
    return -x

@il.pipeline(name="flyte-change")
def change(x: int = 1):
    c(frame=b(frame=a(x=x)))
    return d(x=x)
'''


def _load_version(tmp_path: Path, version: int, factor: int, a_comment: str = "pass") -> il.Pipeline:
    pkg = tmp_path / "codes"
    pkg.mkdir(exist_ok=True)
    name = f"flyte_change_v{version}"
    (pkg / f"{name}.py").write_text(textwrap.dedent(_CHANGE_SRC.format(factor=factor, a_comment=a_comment)))
    if str(pkg) not in sys.path:
        sys.path.insert(0, str(pkg))
    importlib.invalidate_caches()
    return importlib.import_module(name).change


def test_code_change_reruns_the_step_and_its_descendants_only(tmp_path: Path) -> None:
    work = tmp_path / "work"
    v1 = _load_version(tmp_path, 1, factor=2)
    assert set(_statuses(il.run(v1, backend="flyte-local", workdir=work)).values()) == {"succeeded"}
    again = il.run(v1, backend="flyte-local", workdir=work)
    assert set(_statuses(again).values()) == {"cached"}

    v2 = _load_version(tmp_path, 2, factor=3)  # only b's source differs
    assert v2.spec.step("b").fingerprint != v1.spec.step("b").fingerprint
    assert v2.spec.step("a").fingerprint == v1.spec.step("a").fingerprint
    changed = il.run(v2, backend="flyte-local", workdir=work)
    assert _statuses(changed) == {"a": "cached", "b": "succeeded", "c": "succeeded", "d": "cached"}


def test_same_dataframe_content_hits_downstream_cache(tmp_path: Path) -> None:
    """A rerun step that writes the same DataFrame to a new blob: downstream keys see content."""
    work = tmp_path / "work"
    v1 = _load_version(tmp_path, 3, factor=2)
    il.run(v1, backend="flyte-local", workdir=work)
    v2 = _load_version(tmp_path, 4, factor=2, a_comment="x = int(x)  # same output, new code")
    assert v2.spec.step("a").fingerprint != v1.spec.step("a").fingerprint
    again = il.run(v2, backend="flyte-local", workdir=work)
    assert _statuses(again) == {"a": "succeeded", "b": "cached", "c": "cached", "d": "cached"}


def test_transient_failure_is_retried_by_the_shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "count"
    monkeypatch.setenv("INTERLOCK_TEST_COUNTER", str(counter))
    result = il.run(flaky_pipeline, backend="flyte-local", workdir=tmp_path / "w", x=5, fail_times=1)
    assert result.status == "succeeded"
    assert result.outputs["o0"] == 11
    assert counter.read_text() == "2"
    assert result.steps["flaky"].attempts == 2
    receipt = json.loads(Path(result.receipt_path).read_text())
    [flaky] = [s for s in receipt["steps"] if s["node"] == "flaky"]
    assert flaky["failure_kinds"] == ["TRANSIENT"]


def test_fatal_failure_stops_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "count"
    monkeypatch.setenv("INTERLOCK_TEST_COUNTER", str(counter))
    result = il.run(broken_pipeline, backend="flyte-local", workdir=tmp_path / "w", raise_on_failure=False)
    assert result.status == "failed"
    assert isinstance(result.error, il.StepFailed)
    assert result.error.kind == "FATAL" and result.error.step == "broken"
    assert "bad config" in result.error.reason
    assert counter.read_text() == "1"  # retry=il.Retry(transient=3) does not apply to FATAL
    assert result.steps["broken"].status == "failed" and result.steps["broken"].attempts == 1
    assert result.steps["add_one"].status == "not-run"
    assert Path(result.error.receipt_path).exists()


def test_retry_resumes_from_the_last_checkpoint(tmp_path: Path) -> None:
    result = il.run(resume_pipeline, backend="flyte-local", workdir=tmp_path / "w", epochs=5, crash_at=3)
    assert result.outputs["o0"] == "attempt=2 start=3 ran=[3, 4]"
    assert result.steps["resumable"].attempts == 2


def test_timeout_is_enforced(tmp_path: Path) -> None:
    t0 = time.monotonic()
    result = il.run(slow_pipeline, backend="flyte-local", workdir=tmp_path / "w", seconds=30.0, raise_on_failure=False)
    assert time.monotonic() - t0 < 20
    assert result.status == "failed"
    # Its own kind (not TRANSIENT): retried only with il.Retry(timeout=N).
    assert result.error.kind == "TIMEOUT" and "ran past its timeout" in result.error.reason
    assert result.steps["slow"].attempts == 1


def test_sigterm_stops_a_flyte_local_step(tmp_path: Path) -> None:
    """flytekit local runs in this process: SIGTERM is a stop, even for an interruptible step
    whose compiled task template says it runs on a cluster (flytekit local never applies it)."""
    result = il.run(stopped_pipeline, backend="flyte-local", workdir=tmp_path / "w", raise_on_failure=False)
    assert result.status == "stopped"
    assert _statuses(result) == {"stopped_step": "stopped"}
    assert result.steps["stopped_step"].attempts == 1
    assert result.error is not None and result.error.exit_code == 143

