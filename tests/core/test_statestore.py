"""Node state that outlives a pod: the shim mirrors fragments and stop markers to a store
(here a local directory store; tests/kfp_backend/test_kfp_cluster_state.py does it on moto S3)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import interlock as il
from interlock.core.run.records import StopMarker
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext
from interlock.core.run.statestore import DurableState, state_key

calls: list[int] = []


@il.step(retry=il.Retry(transient=1, preempted=2))
def resets(x: int) -> int:
    calls.append(x)
    raise ConnectionResetError("reset")


def pod(tmp_path: Path, name: str, store: str, run_id: str = "r1") -> RunContext:
    """A fresh pod: its own state directory; only the store is shared."""
    return RunContext("p", run_id, "kfp", tmp_path / name / "state", state_store=store, sleeper=lambda s: None)


def test_a_fresh_pod_sees_the_stop_marker_of_an_earlier_one(tmp_path: Path) -> None:
    calls.clear()
    store = str(tmp_path / "shared-store")
    with pytest.raises(il.StepFailed):
        execute_step(pod(tmp_path, "pod-1", store), resets.spec, "resets", {"x": 1}, fn=resets.fn)
    assert calls == [1, 1]
    second = pod(tmp_path, "pod-2", store)
    with pytest.raises(il.StepFailed) as info:
        execute_step(second, resets.spec, "resets", {"x": 1}, fn=resets.fn)
    assert calls == [1, 1] and "giving up after 1 retry" in info.value.reason
    assert second.state.read_marker("resets", StopMarker.EXHAUSTED) is not None  # pulled into the pod
    # Another run shares the store but not the marker.
    with pytest.raises(il.StepFailed) as other:
        execute_step(pod(tmp_path, "pod-3", store, run_id="r2"), resets.spec, "resets", {"x": 1}, fn=resets.fn)
    assert "already failed" not in other.value.reason and calls == [1, 1, 1, 1]


def test_push_and_pull_round_trip_and_keys(tmp_path: Path) -> None:
    ctx = pod(tmp_path, "a", str(tmp_path / "store"))
    from interlock.core.base.status import FailureKind
    from interlock.core.failure.record import Failure

    ctx.state.write_marker("n", Failure(FailureKind.FATAL, "boom"))
    durable = DurableState(ctx.state_store or "", "p", "r1")
    assert durable.push(ctx.state, "n") is True
    assert state_key("p", "r1", "n") == "p/r1/interlock-state/n"
    fresh = pod(tmp_path, "b", str(tmp_path / "store"))
    durable.pull(fresh.state, "n")
    marker = fresh.state.stop_marker("n")
    assert marker is not None and marker.failure.reason == "boom"
    assert not durable.push(fresh.state, "missing")  # nothing to keep


def test_an_unwritable_store_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's directory should be")
    ctx = pod(tmp_path, "a", str(blocker / "store"))
    from interlock.core.base.status import FailureKind
    from interlock.core.failure.record import Failure

    ctx.state.write_marker("n", Failure(FailureKind.FATAL, "boom"))
    with caplog.at_level(logging.ERROR, logger="interlock.statestore"):
        assert DurableState(ctx.state_store or "", "p", "r1").push(ctx.state, "n") is False
    assert "a backend retry may run it again" in caplog.text
