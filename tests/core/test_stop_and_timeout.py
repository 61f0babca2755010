"""SIGTERM / Ctrl-C stop a run (a preemption only for an interruptible step on a cluster),
timeouts hold (a BaseException, re-armed, enforced off the main thread, their own kind), and
a failure keeps the user's traceback. Through the runtime shim, with real signals.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import interlock as il
import interlock.core
from interlock.core.base.errors import StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.store import store_for_uri
from interlock.core.failure.rules import classify
from interlock.core.failure.taxonomy import StepTimeout
from interlock.core.run.files import last_object
from interlock.core.run.records import StopMarker
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext

needs_main_thread = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers (SIGTERM, SIGALRM) can only be installed on the main thread",
)


def shim(tmp_path: Path, **kw: Any) -> RunContext:
    return RunContext("stop-test", "run-1", "local", tmp_path / "state", sleeper=lambda s: None, **kw)


def execute(run: RunContext, step: Any, **inputs: Any) -> Any:
    return execute_step(run, step.spec, step.name, inputs, fn=step.fn)


def fragment(run: RunContext, node: str) -> dict[str, Any]:
    return last_object(run.state.fragment_path(node).read_bytes())


# -- SIGTERM / SIGINT: a stop ----------------------------------------------------------------------
@needs_main_thread
@pytest.mark.parametrize("signum, name, code", [(signal.SIGTERM, "SIGTERM", 143), (signal.SIGINT, "SIGINT", 130)])
def test_a_signal_stops_a_local_step_without_a_retry(tmp_path: Path, signum: int, name: str, code: int) -> None:
    calls: list[int] = []

    # interruptible, with a preemption budget: still a stop, because this is not a cluster.
    @il.step(retry=il.Retry(transient=2, preempted=10), interruptible=True)
    def slow(x: int) -> int:
        calls.append(x)
        os.kill(os.getpid(), signum)
        time.sleep(10)
        return x

    run = shim(tmp_path)
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    t0 = time.monotonic()
    with pytest.raises(StepStopped) as info:
        execute(run, slow, x=1)
    assert time.monotonic() - t0 < 3
    err = info.value
    assert (err.step, err.signal, err.exit_code, err.checkpoint) == ("slow", name, code, None)
    assert calls == [1]  # not retried
    frag = fragment(run, "slow")
    assert frag["status"] == "stopped" and frag["facts"]["stopped_by"] == name
    assert [a["status"] for a in frag["attempts"]] == ["stopped"]
    assert not run.state.marker_path("slow").exists()  # not a FATAL failure
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    # A backend retry of the stopped task (KFP retries any non-zero exit) stops again at once.
    assert run.state.marker_path("slow", StopMarker.STOPPED).exists()
    with pytest.raises(StepStopped) as again:
        execute(run, slow, x=1)
    assert calls == [1] and again.value.signal == name


@needs_main_thread
def test_a_step_with_a_checkpoint_policy_checkpoints_before_it_stops(tmp_path: Path) -> None:
    @il.step(checkpoint=il.CheckpointPolicy(every="1h", keep=2))
    def train(epochs: int, ctx: il.StepContext) -> int:
        for epoch in range(epochs):
            if epoch == 3:
                os.kill(os.getpid(), signal.SIGTERM)
            if ctx.checkpoint_due():  # True at once after the signal
                ctx.checkpoint.save({"epoch": epoch})
            time.sleep(0.01)
        return epochs

    run = shim(tmp_path)
    with pytest.raises(StepStopped) as info:
        execute(run, train, epochs=1000)
    assert info.value.checkpoint is not None
    assert "checkpoint" in info.value.reason and "committed" in info.value.reason
    saved = Checkpointer(store_for_uri(str(run.state.checkpoints_dir)), "stop-test/run-1/train").load()
    assert saved == {"epoch": 3}
    assert fragment(run, "train")["facts"]["checkpoint_at_stop"] == info.value.checkpoint


@needs_main_thread
def test_a_step_that_does_not_checkpoint_within_the_grace_still_stops(tmp_path: Path) -> None:
    @il.step(checkpoint=il.CheckpointPolicy(every="1h"))
    def stubborn(x: int, ctx: il.StepContext) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            try:
                time.sleep(0.01)
            except Exception:  # noqa: BLE001, S112 - a loop that swallows everything it can
                continue
        return x

    t0 = time.monotonic()
    with pytest.raises(StepStopped) as info:
        execute(shim(tmp_path, preemption_grace_s=0.3), stubborn, x=1)
    assert time.monotonic() - t0 < 3
    assert info.value.checkpoint is None


@needs_main_thread
def test_sigterm_is_a_preemption_only_for_an_interruptible_step_on_a_cluster(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=0, preempted=1), interruptible=True)
    def spot(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
        return x

    # What a cluster task template sets; RunContext reads it like the shim in a pod does.
    run = RunContext.from_env({"INTERLOCK_ON_CLUSTER": "1"}, pipeline="stop-test", run_id="run-1",
                              state_dir=tmp_path / "state", preemption_grace_s=0.2)
    assert run.on_cluster
    result = execute_step(run, spot.spec, "spot", {"x": 5}, fn=spot.fn)
    assert result.outputs == {"o0": 5}
    assert [a.failure["kind"] if a.failure else None for a in result.attempts] == ["PREEMPTED", None]

    @il.step(retry=il.Retry(preempted=3))
    def on_demand(x: int) -> int:  # not interruptible: on a cluster too, SIGTERM is a stop
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        return x

    with pytest.raises(StepStopped):
        execute_step(run, on_demand.spec, "on_demand", {"x": 1}, fn=on_demand.fn)
    assert not RunContext.from_env({}).on_cluster
    assert RunContext.from_env(run.to_env()).on_cluster  # a child process (torch worker) keeps it


# -- timeouts ----------------------------------------------------------------------------------------
def _swallowing_loop(seconds: float) -> int:
    """A training loop that catches Exception on every batch (the defect: it ran past 1s)."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        try:
            time.sleep(0.01)
            n += 1
        except Exception:  # noqa: BLE001, S112
            continue
    return n


@needs_main_thread
def test_a_timeout_is_not_swallowed_by_except_exception(tmp_path: Path) -> None:
    @il.step(timeout="0.5s", retry=il.Retry(transient=2))
    def loop(x: int) -> int:
        return _swallowing_loop(8)

    t0 = time.monotonic()
    with pytest.raises(il.StepFailed) as info:
        execute(shim(tmp_path), loop, x=1)
    assert time.monotonic() - t0 < 3
    err = info.value
    assert err.kind is FailureKind.TIMEOUT and err.attempts == 1  # TIMEOUT, not TRANSIENT: not retried
    assert err.failure is not None and err.failure.rule == "step-timeout"
    assert "exceeded its timeout of 0.5s" in err.failure.message
    assert err.hint and "il.Retry(timeout=N)" in err.hint


@needs_main_thread
def test_a_timeout_fires_again_until_the_step_ends(tmp_path: Path) -> None:
    caught: list[str] = []

    @il.step(timeout=0.3)
    def stubborn(x: int) -> int:
        end = time.monotonic() + 8
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except BaseException as exc:  # noqa: BLE001 - a retry helper that swallows twice
                if len(caught) >= 2:
                    raise
                caught.append(type(exc).__name__)
        return x

    t0 = time.monotonic()
    with pytest.raises(il.StepFailed) as info:
        execute(shim(tmp_path), stubborn, x=1)
    assert time.monotonic() - t0 < 4
    assert caught == ["StepTimeout", "StepTimeout"] and info.value.kind is FailureKind.TIMEOUT


def test_a_timeout_holds_off_the_main_thread(tmp_path: Path) -> None:
    @il.step(timeout=0.5)
    def loop(x: int) -> int:
        return _swallowing_loop(8)

    @il.step(timeout=0.5)
    def spin(x: int) -> int:  # pure Python, no blocking call at all
        end = time.monotonic() + 8
        while time.monotonic() < end:
            try:
                x += 1
            except Exception:  # noqa: BLE001, S112
                continue
        return x

    errors: dict[str, BaseException] = {}
    took: dict[str, float] = {}

    def work(step: Any) -> None:
        t0 = time.monotonic()
        try:
            execute(shim(tmp_path / step.name), step, x=1)
        except BaseException as exc:  # noqa: BLE001
            errors[step.name] = exc
        took[step.name] = time.monotonic() - t0

    threads = [threading.Thread(target=work, args=(s,)) for s in (loop, spin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for name in ("loop", "spin"):
        err = errors.get(name)
        assert isinstance(err, il.StepFailed), (name, err)
        assert err.kind is FailureKind.TIMEOUT and took[name] < 4, (name, took)
        assert "exceeded its timeout of 0.5s" in err.failure.message


@needs_main_thread
def test_a_timeout_is_retried_only_as_often_as_retry_timeout_allows(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(timeout=0.2, retry=il.Retry(transient=2, timeout=1))
    def slow_once(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            time.sleep(5)
        return x

    result = execute(shim(tmp_path), slow_once, x=7)
    assert result.outputs == {"o0": 7}
    assert [a.failure["kind"] if a.failure else None for a in result.attempts] == ["TIMEOUT", None]
    assert result.attempts[0].decision.startswith("TIMEOUT 1/1")


def test_timeouts_have_their_own_kind_and_policy_field() -> None:
    f = classify(StepTimeout("step 'x' exceeded its timeout of 1s"))
    assert (f.kind, f.rule) == (FailureKind.TIMEOUT, "step-timeout")
    assert classify(TimeoutError("socket read")).kind is FailureKind.TRANSIENT  # an I/O timeout stays transient
    assert not issubclass(StepTimeout, Exception)
    policy = il.Retry(timeout=2)
    assert il.Retry.from_dict(policy.to_dict()) == policy and policy.max_retries == il.Retry().max_retries + 2
    with pytest.raises(il.PolicyError):
        il.Retry(timeout=-1)


# -- tracebacks --------------------------------------------------------------------------------------
def test_a_failure_keeps_the_users_traceback(tmp_path: Path) -> None:
    @il.step
    def lookup(d: dict) -> int:
        return d["missing"]

    line = lookup.fn.__code__.co_firstlineno + 2
    run = shim(tmp_path)
    with pytest.raises(il.StepFailed) as info:
        execute(run, lookup, d={"a": 1})
    tb = info.value.failure.traceback
    assert tb and f'{__file__}", line {line}, in lookup' in tb and tb.rstrip().endswith("KeyError: 'missing'")
    assert "core/run/runtime.py" not in tb  # interlock's frames trimmed
    assert str(Path(interlock.core.__file__).parent) not in tb  # from every layer of core
    recorded = fragment(run, "lookup")["attempts"][0]["failure"]["traceback"]
    assert recorded == tb
    assert Status(fragment(run, "lookup")["status"]) is Status.FAILED
