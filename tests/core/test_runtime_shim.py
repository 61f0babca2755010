"""The runtime shim (``interlock.core.run.runtime.execute_step``): retries per failure kind, the
FATAL marker, preemption with a checkpoint, timeouts, OOM remediation, output checks and the
receipt fragment. The sleeper is injected and records delays: nothing here really waits.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import interlock as il
from interlock.core.base.errors import SerializationError
from interlock.core.base.status import FailureKind
from interlock.core.run.files import last_object
from interlock.core.run.records import StopMarker
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext

GPU_FULL = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu"

needs_main_thread = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers (SIGTERM, SIGALRM) can only be installed on the main thread",
)


class Shim:
    """One run's context with a recording sleeper."""

    def __init__(self, tmp_path: Path, run_id: str = "run-1", **kw: Any):
        self.delays: list[float] = []
        self.run = RunContext("shim-test", run_id, "local", tmp_path / "state", sleeper=self.delays.append, **kw)

    def execute(self, step: il.step, fn: Any = None, node: str | None = None, **inputs: Any) -> Any:
        return execute_step(self.run, step.spec, node or step.name, inputs, fn=fn or step.fn)


def kinds(attempts: list[Any]) -> list[str | None]:
    return [a.failure["kind"] if a.failure else None for a in attempts]


# -- TRANSIENT -------------------------------------------------------------------------------------
def test_transient_is_retried_at_once_then_succeeds(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=2))
    def fetch(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            raise ConnectionResetError("connection reset by peer")
        return x * 10

    shim = Shim(tmp_path)
    result = shim.execute(fetch, x=4)
    assert result.outputs == {"o0": 40}
    assert len(calls) == 2
    assert shim.delays == []  # immediate: the sleeper was never called
    assert kinds(result.attempts) == ["TRANSIENT", None]
    assert [a.status for a in result.attempts] == ["failed", "succeeded"]


def test_transient_budget_runs_out(tmp_path: Path) -> None:
    @il.step(retry=il.Retry(transient=1))
    def always_resets(x: int) -> int:
        raise ConnectionResetError("reset")

    shim = Shim(tmp_path)
    with pytest.raises(il.StepFailed) as info:
        shim.execute(always_resets, x=1)
    err = info.value
    assert (err.step, err.kind, err.attempts) == ("always_resets", "TRANSIENT", 2)
    assert "network connection dropped" in err.reason
    # Not FATAL, but the shim gave up: a stop marker so that a backend retry ends at once.
    assert not shim.run.state.marker_path("always_resets").exists()
    marker = json.loads(shim.run.state.marker_path("always_resets", StopMarker.EXHAUSTED).read_text())
    assert marker["failure"]["kind"] == "TRANSIENT" and "giving up after 1 retry" in marker["failure"]["reason"]


def test_a_backend_retry_after_a_spent_budget_stops_at_once(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=1))
    def always_resets(x: int) -> int:
        calls.append(x)
        raise ConnectionResetError("reset")

    shim = Shim(tmp_path)
    with pytest.raises(il.StepFailed):
        shim.execute(always_resets, x=1)
    t0 = time.perf_counter()
    with pytest.raises(il.StepFailed) as again:  # KFP's set_retry, or a new pod for the same node
        shim.execute(always_resets, x=1)
    assert time.perf_counter() - t0 < 1.0 and calls == [1, 1]
    assert again.value.kind == "TRANSIENT"
    assert "already failed TRANSIENT earlier in run run-1" in again.value.reason
    assert "giving up after 1 retry" in again.value.reason and "retry budget is spent" in again.value.reason


def test_a_step_without_a_retry_policy_runs_once(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step
    def flaky(x: int) -> int:
        calls.append(x)
        raise ConnectionResetError("reset")

    with pytest.raises(il.StepFailed) as info:
        Shim(tmp_path).execute(flaky, x=1)
    assert calls == [1] and info.value.attempts == 1


def test_retry_n_retries_an_unclassified_bug(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=3)  # a literal port of flytekit's retries=3 / KFP's set_retry(3)
    def buggy(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise KeyError("missing")
        return x

    result = Shim(tmp_path).execute(buggy, x=7)
    assert result.outputs == {"o0": 7} and kinds(result.attempts) == ["FATAL", "FATAL", None]


def test_an_output_that_cannot_be_written_fails_inside_the_shim(tmp_path: Path) -> None:
    """The backend's writer runs in the attempt: its failure is classified, recorded and marked."""
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=2))
    def produce(x: int) -> int:
        calls.append(x)
        return x

    def write(outputs: dict[str, Any]) -> Any:
        raise SerializationError("output 'o0' cannot be serialized as a KFP parameter")

    shim = Shim(tmp_path)
    with pytest.raises(il.StepFailed) as info:
        execute_step(shim.run, produce.spec, "produce", {"x": 1}, fn=produce.fn, write=write)
    assert info.value.kind == "FATAL" and calls == [1]
    fragment = last_object(shim.run.state.fragment_path("produce").read_bytes())
    assert fragment["status"] == "failed" and "cannot be serialized" in fragment["attempts"][0]["failure"]["message"]
    assert shim.run.state.stop_marker("produce") is not None
    ok = execute_step(Shim(tmp_path / "b").run, produce.spec, "produce", {"x": 2}, fn=produce.fn, write=lambda o: ["written", o])
    assert ok.written == ["written", {"o0": 2}]


# -- CONTENTION ------------------------------------------------------------------------------------
def test_contention_backoff_follows_first_times_factor_power_capped(tmp_path: Path) -> None:
    backoff = il.Backoff(attempts=5, first="10s", factor=3, max_delay="2m", max_total=None)
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=0, contention=backoff))
    def schedule(x: int) -> int:
        calls.append(x)
        if len(calls) <= 5:
            raise RuntimeError(GPU_FULL)
        return x

    shim = Shim(tmp_path)
    result = shim.execute(schedule, x=7)
    assert result.outputs == {"o0": 7}
    expected = [min(10 * 3 ** (n - 1), 120) for n in range(1, 6)]
    assert expected == [10, 30, 90, 120, 120]
    assert shim.delays == expected
    assert [a.delay_s for a in result.attempts] == [*expected, 0.0]
    assert kinds(result.attempts) == ["CONTENTION"] * 5 + [None]


def test_contention_stops_at_max_total(tmp_path: Path) -> None:
    backoff = il.Backoff(attempts=10, first="10s", factor=2, max_delay="1h", max_total="70s")

    @il.step(retry=il.Retry(contention=backoff))
    def never_schedules(x: int) -> int:
        raise RuntimeError(GPU_FULL)

    shim = Shim(tmp_path)
    with pytest.raises(il.StepFailed) as info:
        shim.execute(never_schedules, x=1)
    assert shim.delays == [10, 20, 40]  # the next wait (80s) would pass max_total=70s
    assert info.value.kind == "CONTENTION" and info.value.attempts == 4
    fragment = last_object(shim.run.state.fragment_path("never_schedules").read_bytes())
    assert "would pass max_total" in fragment["attempts"][-1]["decision"]


# -- FATAL -----------------------------------------------------------------------------------------
def test_fatal_is_not_retried_and_leaves_a_marker(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=3, contention=3))
    def check(x: int) -> int:
        calls.append(x)
        raise il.ValidationFailed("column 'amount' has 12 negative values")

    shim = Shim(tmp_path)
    with pytest.raises(il.StepFailed) as info:
        shim.execute(check, x=1)
    err = info.value
    assert (err.kind, err.attempts, len(calls)) == ("FATAL", 1, 1)
    assert err.retryable is False and err.backend_should_retry is False
    assert shim.delays == []
    marker = json.loads(shim.run.state.marker_path("check").read_text())
    assert marker["failure"]["kind"] == "FATAL" and marker["run_id"] == "run-1"

    # A backend retry of the same node in the same run ends at once without calling the step.
    second_calls: list[int] = []

    def counting(x: int) -> int:
        second_calls.append(x)
        return x

    t0 = time.monotonic()
    with pytest.raises(il.StepFailed) as again:
        shim.execute(check, fn=counting, x=1)
    assert time.monotonic() - t0 < 0.5
    assert second_calls == []
    assert again.value.kind == "FATAL"
    assert "already failed FATAL earlier in run run-1" in again.value.reason
    assert "data validation failed" in again.value.reason

    # The marker belongs to that run: a new run starts the step normally.
    fresh = Shim(tmp_path, run_id="run-2")
    assert fresh.execute(check, fn=counting, x=5).outputs == {"o0": 5}
    assert second_calls == [5]


def test_unknown_errors_are_fatal_with_a_hint(tmp_path: Path) -> None:
    @il.step
    def buggy(x: int) -> int:
        raise ValueError("bad shape")

    with pytest.raises(il.StepFailed) as info:
        Shim(tmp_path).execute(buggy, x=1)
    assert info.value.kind == "FATAL" and info.value.attempts == 1
    assert "unclassified ValueError: bad shape" in info.value.reason
    assert info.value.hint and "register_rule" in info.value.hint


# -- PREEMPTED -------------------------------------------------------------------------------------
@needs_main_thread
def test_sigterm_checkpoints_then_resumes_without_spending_the_budget(tmp_path: Path) -> None:
    seen: list[Any] = []

    @il.step(retry=il.Retry(transient=1, preempted=2), checkpoint=il.CheckpointPolicy(every="1h", keep=2), interruptible=True)
    def train(epochs: int, ctx: il.StepContext) -> int:
        state = ctx.checkpoint.load()
        seen.append(state)
        if state is None:
            os.kill(os.getpid(), signal.SIGTERM)  # the spot reclaim
            assert ctx.checkpoint_due()  # the shim asks the step to checkpoint now
            ctx.checkpoint.save({"epoch": 3})  # the shim yields right after this commit
            raise AssertionError("save() should have raised Preempted")
        if len(seen) == 2:
            raise ConnectionResetError("NCCL peer reset")  # uses the one transient retry
        return state["epoch"] + epochs

    before = signal.getsignal(signal.SIGTERM)
    shim = Shim(tmp_path, on_cluster=True)  # a cluster's task: SIGTERM is the spot reclaim
    result = shim.execute(train, epochs=2)
    assert result.outputs == {"o0": 5}
    assert seen == [None, {"epoch": 3}, {"epoch": 3}]
    assert kinds(result.attempts) == ["PREEMPTED", "TRANSIENT", None]
    assert "not counted against the retry budget" in result.attempts[0].decision
    assert "TRANSIENT 1/1" in result.attempts[1].decision
    assert shim.delays == []
    assert signal.getsignal(signal.SIGTERM) is before  # the shim restores the handler


@needs_main_thread
def test_sigterm_without_a_checkpoint_is_preempted_after_the_grace(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=0, preempted=1), interruptible=True)
    def slow(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
        return x

    shim = Shim(tmp_path, preemption_grace_s=0.2, on_cluster=True)
    t0 = time.monotonic()
    result = shim.execute(slow, x=3)
    assert time.monotonic() - t0 < 5
    assert result.outputs == {"o0": 3}
    assert kinds(result.attempts) == ["PREEMPTED", None]


def test_a_retry_in_the_same_run_resumes_and_a_new_run_starts_fresh(tmp_path: Path) -> None:
    loaded: list[Any] = []

    @il.step(retry=il.Retry(transient=1), checkpoint=il.CheckpointPolicy(keep=1))
    def work(x: int, ctx: il.StepContext) -> int:
        loaded.append(ctx.checkpoint.load())
        ctx.checkpoint.save({"x": x})
        if len(loaded) == 1:
            raise ConnectionResetError("reset")
        return x

    shim = Shim(tmp_path, retry_in_process=frozenset())
    with pytest.raises(il.StepFailed) as info:
        shim.execute(work, x=1)
    assert info.value.backend_should_retry is True
    assert shim.execute(work, x=2).outputs == {"o0": 2}  # the backend's retry
    Shim(tmp_path, run_id="run-2").execute(work, x=3)
    assert loaded == [None, {"x": 1}, None]


# -- timeout ---------------------------------------------------------------------------------------
@needs_main_thread
def test_timeout_is_enforced(tmp_path: Path) -> None:
    @il.step(timeout=0.3, retry=il.Retry(transient=0))
    def hangs(x: int) -> int:
        time.sleep(10)
        return x

    t0 = time.monotonic()
    with pytest.raises(il.StepFailed) as info:
        Shim(tmp_path).execute(hangs, x=1)
    assert time.monotonic() - t0 < 3
    assert "exceeded its timeout of 0.3s" in str(info.value.failure.message)
    assert info.value.failure.exc_type.endswith("StepTimeout")


# -- OOM remediation ---------------------------------------------------------------------------------
def test_oom_remediation_halves_the_batch(tmp_path: Path) -> None:
    batches: list[tuple[int, int]] = []

    @il.step(retry=il.Retry(transient=0, oom_remediation=True))
    def fit(requested: int, ctx: il.StepContext) -> int:
        bs = ctx.batch_size(requested)
        batches.append((bs, ctx.grad_accumulation(1)))
        if bs > 16:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return bs

    result = Shim(tmp_path).execute(fit, requested=64)
    assert batches == [(64, 1), (32, 2), (16, 4)]  # the effective batch stays 64
    assert result.outputs == {"o0": 16}
    assert [a.batch_size_factor for a in result.attempts] == [1.0, 0.5, 0.25]


def test_oom_without_opt_in_is_fatal_and_says_reduce_the_batch(tmp_path: Path) -> None:
    @il.step
    def fit(requested: int) -> int:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(il.StepFailed) as info:
        Shim(tmp_path).execute(fit, requested=64)
    assert info.value.kind == "FATAL" and info.value.attempts == 1
    assert "reduce the batch size" in (info.value.hint or "")


# -- outputs ---------------------------------------------------------------------------------------
def test_wrong_return_type_names_step_and_port(tmp_path: Path) -> None:
    @il.step
    def answer(x: int) -> int:
        return "forty-two"  # type: ignore[return-value]

    with pytest.raises(il.StepFailed) as info:
        Shim(tmp_path).execute(answer, x=1)
    err = info.value
    assert err.kind == "FATAL" and err.attempts == 1
    message = err.failure.message
    assert "step 'answer', output 'o0'" in message and "returned str" in message and "declared int" in message


class Pair(NamedTuple):
    left: int
    right: str


def test_wrong_field_type_in_a_namedtuple_output(tmp_path: Path) -> None:
    @il.step
    def split(x: int) -> Pair:
        return Pair(x, x)  # type: ignore[arg-type]

    with pytest.raises(il.StepFailed) as info:
        Shim(tmp_path).execute(split, x=1)
    assert "step 'split', output 'right'" in info.value.failure.message

    @il.step
    def short(x: int) -> Pair:
        return (x,)  # type: ignore[return-value]

    with pytest.raises(il.StepFailed, match="must return a Pair of 2 values"):
        Shim(tmp_path).execute(short, x=1)


# -- receipt fragment ------------------------------------------------------------------------------
def test_fragment_records_attempts_and_a_backend_retry_appends(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=1, contention=il.Backoff(attempts=1, first="1m")))
    def flaky(x: int, ctx: il.StepContext) -> int:
        calls.append(x)
        ctx.record_snapshot("snap-1", uri="s3://data/snap-1")
        ctx.record(precision="bf16")
        if len(calls) <= 2:
            raise (ConnectionResetError("reset") if len(calls) == 1 else RuntimeError(GPU_FULL))
        return x

    # The backend retries (nothing in-process): each execute_step is one container attempt.
    shim = Shim(tmp_path, retry_in_process=frozenset())
    for expected_kind in ("TRANSIENT", "CONTENTION"):
        with pytest.raises(il.StepFailed) as info:
            shim.execute(flaky, x=1)
        assert info.value.kind == expected_kind and info.value.backend_should_retry
    shim.execute(flaky, x=1)
    fragment = last_object(shim.run.state.fragment_path("flaky").read_bytes())
    assert fragment["status"] == "succeeded"
    assert [a["failure"]["kind"] if a["failure"] else None for a in fragment["attempts"]] == [
        "TRANSIENT", "CONTENTION", None,
    ]
    assert all(a["duration_s"] >= 0 for a in fragment["attempts"])
    assert fragment["snapshots"] == [{"id": "snap-1", "uri": "s3://data/snap-1"}]
    assert fragment["facts"] == {"precision": "bf16"}
    assert fragment["fingerprint"] == flaky.spec.fingerprint
    assert shim.delays == []  # the backend waits, not the shim


def test_backend_retries_replay_the_budget(tmp_path: Path) -> None:
    @il.step(retry=il.Retry(transient=1))
    def resets(x: int) -> int:
        raise ConnectionResetError("reset")

    shim = Shim(tmp_path, retry_in_process=frozenset())
    with pytest.raises(il.StepFailed) as first:
        shim.execute(resets, x=1)
    assert first.value.backend_should_retry is True
    with pytest.raises(il.StepFailed) as second:
        shim.execute(resets, x=1)
    # The first container spent the one transient retry; the second must not get another.
    assert second.value.backend_should_retry is False
    decisions = [a["decision"] for a in last_object(shim.run.state.fragment_path("resets").read_bytes())["attempts"]]
    assert decisions[0].startswith("TRANSIENT 1/1")
    assert "giving up after 1 retry" in decisions[1]


def test_run_context_round_trips_through_the_environment(tmp_path: Path) -> None:
    run = RunContext("p", "r-9", "kfp", tmp_path, retry_in_process=frozenset({FailureKind.FATAL}))
    back = RunContext.from_env(run.to_env())
    assert (back.pipeline, back.run_id, back.backend, back.state_dir) == ("p", "r-9", "kfp", tmp_path)
    assert back.retry_in_process == frozenset({FailureKind.FATAL})


def test_a_shared_state_dir_keeps_runs_apart(tmp_path: Path) -> None:
    # On KFP the state directory can be a PVC shared by every run: an earlier run's attempts
    # must not spend this run's budget, and its fragment must not leak into this receipt.
    @il.step(retry=il.Retry(transient=1))
    def resets(x: int) -> int:
        raise ConnectionResetError("reset")

    first = Shim(tmp_path, run_id="run-a", retry_in_process=frozenset())
    for _ in range(2):
        with pytest.raises(il.StepFailed):
            first.execute(resets, x=1)
    second = Shim(tmp_path, run_id="run-b", retry_in_process=frozenset())
    with pytest.raises(il.StepFailed) as info:
        second.execute(resets, x=1)
    assert info.value.backend_should_retry is True
    fragment = last_object(second.run.state.fragment_path("resets").read_bytes())
    assert fragment["run_id"] == "run-b" and len(fragment["attempts"]) == 1
