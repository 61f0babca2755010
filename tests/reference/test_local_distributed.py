"""Distributed steps on the `local` backend: local gloo ranks, judged as kfp-local judges them.

Uses the drill pipeline of tests/kfp_backend (a two-rank all-reduce whose rank fails on demand).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kfp_test_pipelines import dist

import interlock as il
from interlock.core.backend.protocol import RunOptions, get_backend, resolve_params
from interlock.core.base.status import FailureKind, Status
from interlock.core.run.state import RunState

SPEC = il.spec(dist.dist_pipeline)


def run(tmp_path: Path, run_id: str, sleeps: list[float] | None = None) -> il.RunResult:
    sleeper = (lambda s: sleeps.append(s)) if sleeps is not None else (lambda s: None)
    options = RunOptions(run_id=run_id, workdir=tmp_path, sleeper=sleeper)
    return get_backend("local").run(SPEC, resolve_params(SPEC, {}), options)  # type: ignore[union-attr]


def train(result: il.RunResult) -> dict[str, Any]:
    receipt = json.loads(Path(result.receipt_path or "").read_text())
    step: dict[str, Any] = next(s for s in receipt["steps"] if s["node"] == "allreduce")
    return step


def test_two_ranks_all_reduce(tmp_path: Path) -> None:
    result = run(tmp_path, "ld-ok")
    assert result.status == "succeeded", result.error
    assert result.outputs["o0"] == "total=47 world=2"  # both ranks' shards, summed


def test_a_rank_out_of_memory_fails_the_step_fatal_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIST_TEST_FAIL_RANK", "1")
    monkeypatch.setenv("DIST_TEST_FAIL_KIND", "oom")
    result = run(tmp_path, "ld-oom")
    assert result.status == "failed"
    err = result.error
    assert err is not None and err.kind is FailureKind.FATAL  # type: ignore[attr-defined]
    assert "rank 1 of 2" in err.reason and "out of memory" in err.reason.lower()
    assert "batch" in (err.hint or "").lower()
    assert len(train(result)["attempts"]) == 1  # no relaunch, no rank retried alone
    assert RunState(Path(result.receipt_path or "").parent, "ld-oom").read_marker("allreduce") is not None
    assert result.steps["report"].status is Status.NOT_RUN  # type: ignore[index]


def test_a_transient_rank_failure_relaunches_the_group_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIST_TEST_FAIL_RANK", "0")
    monkeypatch.setenv("DIST_TEST_FAIL_KIND", "reset")
    monkeypatch.setenv("DIST_TEST_ONCE", str(tmp_path / "reset-once"))
    sleeps: list[float] = []
    result = run(tmp_path, "ld-reset", sleeps)
    assert result.status == "succeeded", result.error
    assert sleeps == []
    kinds = [a["failure"]["kind"] for a in train(result)["attempts"] if a.get("failure")]
    assert kinds == ["TRANSIENT"]


def test_a_killed_rank_is_preempted_and_relaunched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIST_TEST_FAIL_RANK", "1")
    monkeypatch.setenv("DIST_TEST_FAIL_KIND", "kill")
    monkeypatch.setenv("DIST_TEST_ONCE", str(tmp_path / "killed-once"))
    result = run(tmp_path, "ld-kill")
    assert result.status == "succeeded", result.error
    kinds = [a["failure"]["kind"] for a in train(result)["attempts"] if a.get("failure")]
    assert kinds == ["PREEMPTED"]
