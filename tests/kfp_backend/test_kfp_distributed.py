"""A distributed step on kfp-local: the launcher task runs two gloo ranks as local processes,
and judges their end as it would a TrainJob's (FATAL once, PREEMPTED to KFP, TRANSIENT at once)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kfp_test_pipelines import dist
from test_kfp_local import Sleeper, receipt, run

from interlock.core.base.status import FailureKind, Status
from interlock.core.run.files import last_object
from interlock.core.run.state import RunState


def step_of(result: Any, node: str) -> dict[str, Any]:
    [step] = [s for s in receipt(result)["steps"] if s["node"] == node]
    return step


def test_two_ranks_train_for_real_through_the_launcher(tmp_path: Path) -> None:
    result = run(dist.dist_pipeline, tmp_path / "work", run_id="dist-ok", n=10, base=1.0)
    assert result.status == "succeeded", result.error
    # Each rank sums its shard of 0..9 plus base; the all-reduce adds both: 45 + 2 * 1.
    assert result.outputs["o0"] == "total=47 world=2"
    step = step_of(result, "allreduce")
    assert step["status"] == "succeeded"
    assert step["distributed"]["nproc_per_node"] == 2
    state = Path(result.receipt_path or "").parent
    # Rank 0 keeps the node's fragment; rank 1 its own, apart.
    assert last_object((state / "ranks" / "1" / "receipts" / "allreduce.json").read_bytes())["status"] == "succeeded"


def test_a_rank_out_of_memory_fails_the_step_fatal_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIST_TEST_FAIL_RANK", "1")
    monkeypatch.setenv("DIST_TEST_FAIL_KIND", "oom")
    sleeper = Sleeper()
    result = run(dist.dist_pipeline, tmp_path / "work", run_id="dist-oom", sleeper=sleeper)
    assert result.status == "failed"
    err = result.error
    assert err is not None and err.kind is FailureKind.FATAL  # type: ignore[attr-defined]
    assert "rank 1 of 2" in err.reason and "out of memory" in err.reason.lower()
    assert "batch" in (err.hint or "").lower()
    tasks = receipt(result)["kfp"]["tasks"]["allreduce"]
    # KFP's retries (set for CONTENTION/PREEMPTED) are stopped by the node's FATAL marker, unslept.
    assert tasks["kfp_attempts"] == 1 and tasks["retries_stopped_by_fatal_marker"] >= 1
    assert sleeper.calls == []
    assert RunState(Path(result.receipt_path or "").parent, "dist-oom").read_marker("allreduce") is not None
    assert result.steps["report"].status is Status.NOT_RUN  # type: ignore[index]


def test_a_killed_rank_is_preempted_and_kfp_retries_the_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIST_TEST_FAIL_RANK", "1")
    monkeypatch.setenv("DIST_TEST_FAIL_KIND", "kill")
    monkeypatch.setenv("DIST_TEST_ONCE", str(tmp_path / "killed-once"))
    result = run(dist.dist_pipeline, tmp_path / "work", run_id="dist-kill")
    assert result.status == "succeeded", result.error
    assert result.outputs["o0"] == "total=47 world=2"
    assert receipt(result)["kfp"]["tasks"]["allreduce"]["kfp_attempts"] == 2


def test_a_transient_rank_failure_relaunches_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIST_TEST_FAIL_RANK", "0")
    monkeypatch.setenv("DIST_TEST_FAIL_KIND", "reset")
    monkeypatch.setenv("DIST_TEST_ONCE", str(tmp_path / "reset-once"))
    sleeper = Sleeper()
    result = run(dist.dist_pipeline, tmp_path / "work", run_id="dist-reset", sleeper=sleeper)
    assert result.status == "succeeded", result.error
    # Relaunched by the launcher inside the same KFP task, without a KFP retry or a wait.
    assert receipt(result)["kfp"]["tasks"]["allreduce"]["kfp_attempts"] == 1
    assert sleeper.calls == []
    kinds = [a["failure"]["kind"] for a in step_of(result, "allreduce")["attempts"] if a.get("failure")]
    assert kinds == ["TRANSIENT"]


@pytest.mark.slow
def test_a_stalled_collective_is_transient_and_relaunched_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 1 sleeps past the collective timeout (45s): rank 0's gloo all-reduce times out,
    TRANSIENT; the launcher stops the straggler (not a reclaimed node) and relaunches at once."""
    monkeypatch.setenv("DIST_TEST_FAIL_RANK", "1")
    monkeypatch.setenv("DIST_TEST_FAIL_KIND", "stall")
    monkeypatch.setenv("DIST_TEST_STALL_S", "90")
    monkeypatch.setenv("DIST_TEST_ONCE", str(tmp_path / "stalled-once"))
    sleeper = Sleeper()
    result = run(dist.dist_pipeline, tmp_path / "work", run_id="dist-stall", sleeper=sleeper)
    assert result.status == "succeeded", result.error
    assert receipt(result)["kfp"]["tasks"]["allreduce"]["kfp_attempts"] == 1 and sleeper.calls == []
    failures = [a["failure"] for a in step_of(result, "allreduce")["attempts"] if a.get("failure")]
    assert [f["kind"] for f in failures] == ["TRANSIENT"]
    assert failures[0]["rule"] == "gloo-network" and "rank 0 of 2" in failures[0]["reason"]


def test_a_default_nccl_job_on_a_cpu_host_says_so_before_launching(tmp_path: Path) -> None:
    from interlock.core.run.devices import visible_gpus

    if visible_gpus() > 0:
        pytest.skip("this host has CUDA GPUs: NCCL can run")
    result = run(dist.nccl_pipeline, tmp_path / "work", run_id="dist-nccl-cpu")
    assert result.status == "failed"
    step = step_of(result, "nccl_fit")
    assert step["status"] == "failed"
    assert "Torchrun(backend='nccl') needs CUDA GPUs and this host has none" in str(result.error)
    assert "backend='auto'" in str(result.error) and "kubectl" not in str(result.error)
    assert [a["status"] for a in step["attempts"]] == ["failed"]  # refused once, before any rank started
