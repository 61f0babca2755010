"""The run state (core/run/state.py): env contract, fragments, markers and the one outcome rule."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import interlock as il
from interlock.core.base.errors import RunFailed, StepFailed
from interlock.core.base.status import FailureKind, Status
from interlock.core.failure.record import Failure
from interlock.core.record.outcomes import Seen, settle
from interlock.core.run.env import EnvName, RunEnv
from interlock.core.run.files import last_object
from interlock.core.run.records import Attempt, Fragment, StopMarker
from interlock.core.run.state import RunContext, RunState


@il.step
def source(x: int) -> int:
    return x


@il.step
def decide(x: int) -> bool:
    return x > 10


@il.step
def use(x: int) -> int:
    return x


@il.pipeline(name="runstate-shape")
def shape(x: int = 1):
    v = source(x=x)
    flag = decide(x=v)
    with il.when(flag):
        use.named("inside")(x=v)
    return use.named("after")(x=use.named("fails")(x=v))


def _fragment(state: RunState, node: str, status: Status, *failures: Failure) -> None:
    attempts = [Attempt(i + 1, 0.0, 1.0, Status.FAILED, f.to_dict()) for i, f in enumerate(failures)]
    if status is not Status.FAILED:
        attempts.append(Attempt(len(attempts) + 1, 1.0, 2.0, status))
    state.write_fragment(Fragment(state.run_id, node, node, status, started=0.0, ended=2.0, attempts=attempts))


# -- env contract ---------------------------------------------------------------------------------
def test_env_contract_round_trips_and_derives_the_state_dir_under_a_shared_root(tmp_path: Path) -> None:
    run = RunContext("p", "r-1", "kfp", tmp_path / "s", retry_in_process=frozenset({FailureKind.TRANSIENT}),
                     checkpoint_root="s3://b/ck")
    back = RunContext.from_env(run.to_env())
    assert (back.pipeline, back.run_id, back.backend, back.state_dir, back.checkpoint_root) == (
        "p", "r-1", "kfp", tmp_path / "s", "s3://b/ck")
    assert back.retry_in_process == frozenset({FailureKind.TRANSIENT})
    # A volume shared by runs: the run id from the orchestrator picks the run's own folder.
    env = {EnvName.STATE_ROOT: str(tmp_path / "pvc"), "ORCHESTRATOR_RUN_ID": "kfp-9"}
    ctx = RunContext.from_env(env, run_id_env="ORCHESTRATOR_RUN_ID")
    assert ctx.run_id == "kfp-9" and ctx.state_dir == tmp_path / "pvc" / "runs" / "kfp-9" / "state"
    assert RunEnv.read({}) == RunEnv() and RunEnv().to_env() == {}


# -- fragments and markers ------------------------------------------------------------------------
def test_fragments_and_markers_of_another_run_are_invisible(tmp_path: Path) -> None:
    mine, other = RunState(tmp_path, "r-new"), RunState(tmp_path, "r-old")
    _fragment(other, "a", Status.FAILED, Failure(FailureKind.FATAL, "old"))
    other.write_marker("a", Failure(FailureKind.FATAL, "old"))
    assert other.read_fragment("a") is not None and other.read_marker("a") is not None
    assert mine.read_fragment("a") is None and mine.read_marker("a") is None
    mine.fragment_path("b").write_text("{not json")
    assert mine.read_fragment("b") is None  # torn or foreign: ignored, never a crash
    assert mine.marker_path("a", StopMarker.FATAL).name == "a.fatal.json"


def test_a_fragment_round_trips_in_the_recorded_json_format(tmp_path: Path) -> None:
    state = RunState(tmp_path, "r-1")
    _fragment(state, "a", Status.SUCCEEDED, Failure(FailureKind.TRANSIENT, "reset"))
    data = last_object(state.fragment_path("a").read_bytes())
    assert data["status"] == "succeeded" and [a["status"] for a in data["attempts"]] == ["failed", "succeeded"]
    assert data["attempts"][0]["duration_s"] == 1.0 and data["attempts"][0]["failure"]["kind"] == "TRANSIENT"
    back = state.read_fragment("a")
    assert back is not None and back.status is Status.SUCCEEDED
    assert [f.kind for f in back.failures()] == [FailureKind.TRANSIENT]


# -- the one outcome rule -------------------------------------------------------------------------
def test_closed_gate_is_skipped_and_an_unreached_node_is_not_run(tmp_path: Path) -> None:
    spec = il.spec(shape)
    state = RunState(tmp_path, "r-1")
    _fragment(state, "source", Status.SUCCEEDED)
    _fragment(state, "decide", Status.SUCCEEDED)
    _fragment(state, "fails", Status.FAILED, Failure(FailureKind.FATAL, "bad config", hint="fix it"))
    seen = {n: Seen(Status.SUCCEEDED) for n in ("source", "decide")} | {"fails": Seen(Status.FAILED)}
    gate = spec.node("inside").gate or ""

    closed = settle(spec, state, seen, gates={gate: False})
    assert closed.statuses == {"source": "succeeded", "decide": "succeeded", "inside": "skipped",
                               "fails": "failed", "after": "not-run"}
    assert closed.status is Status.FAILED
    err = closed.error
    assert isinstance(err, StepFailed) and (err.step, err.kind, err.reason, err.hint) == ("fails", "FATAL", "bad config", "fix it")
    assert err.pipeline == "runstate-shape" and err.attempts == 1 and len(err.attempt_log) == 1
    assert closed.steps["fails"].failure == Failure(FailureKind.FATAL, "bad config", hint="fix it").to_dict()
    # The gate was never decided (its condition did not run): not reached means NOT_RUN.
    assert settle(spec, state, seen).statuses["inside"] == "not-run"


def test_what_the_backend_saw_decides_cached_and_failures_outside_the_shim(tmp_path: Path) -> None:
    spec = il.spec(shape)
    state = RunState(tmp_path, "r-1")
    state.write_marker("fails", Failure(FailureKind.FATAL, "CUDA error", hint="check the GPU"))
    seen = {"source": Seen(Status.CACHED, duration_s=0.25), "decide": Seen(Status.SUCCEEDED),
            "fails": Seen(Status.FAILED, shim_ran=False)}
    out = settle(spec, state, seen, gates={})
    assert out.steps["source"].status is Status.CACHED and out.steps["source"].cached
    assert out.steps["source"].duration_s == 0.25 and out.steps["source"].attempts == 0
    err = out.error
    assert isinstance(err, StepFailed) and "already failed FATAL earlier in run r-1: CUDA error" in err.reason
    assert err.hint == "check the GPU"
    # A crash before any step: a RunFailed that names no step.
    crash = settle(spec, RunState(tmp_path / "x", "r-2"), {}, failed="kfp could not start")
    assert type(crash.error) is RunFailed and crash.status is Status.FAILED
    assert set(crash.statuses.values()) == {Status.NOT_RUN}


def test_without_observations_the_fragments_decide(tmp_path: Path) -> None:
    # The KFP exit task reads only the fragments of this run.
    spec = il.spec(shape)
    state = RunState(tmp_path, "r-1")
    _fragment(state, "source", Status.SUCCEEDED)
    _fragment(state, "fails", Status.FAILED, Failure(FailureKind.CONTENTION, "no GPUs"))
    out = settle(spec, state, None)
    assert out.statuses == {"source": "succeeded", "decide": "not-run", "inside": "not-run",
                            "fails": "failed", "after": "not-run"}
    assert isinstance(out.error, StepFailed) and out.error.kind is FailureKind.CONTENTION


# -- typed failures -------------------------------------------------------------------------------
def test_step_failed_is_typed_and_its_message_is_computed() -> None:
    err = StepFailed("train", "contention", "no GPUs", hint="wait", attempts=3, pipeline="p",
                     backend_should_retry=True)
    assert err.kind is FailureKind.CONTENTION and err.retryable and err.backend_should_retry
    assert "receipt:" not in str(err)
    err.receipt_path = "/runs/r/state/receipt.json"
    assert str(err) == (
        "step 'train' failed (CONTENTION) after 3 attempt(s): no GPUs\n"
        "  receipt: /runs/r/state/receipt.json\n  hint: wait"
    )
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is StepFailed and str(back) == str(err) and back.kind is FailureKind.CONTENTION
    fatal = StepFailed("x", FailureKind.FATAL, "bad")
    assert not fatal.retryable and not fatal.backend_should_retry and isinstance(fatal, RunFailed)
    with pytest.raises(ValueError):
        StepFailed("x", "SOMETIMES", "bad")
