"""The runtime shim: the one piece of code that executes a step, on every backend.

Backends only schedule. Inside whatever process or container a backend gives a step, the
shim does the same work: refuse to redo a step that already failed FATAL in this run,
build the step context (checkpointer keyed stably across retries), call the function,
classify a failure, retry in-process where the backend cannot (or should not), enforce the
step's timeout, handle SIGTERM and Ctrl-C (a stop; a preemption only for an interruptible
step in a cluster's task), check the outputs, and write a receipt fragment with the
failure's traceback. flytekit's and kfp's local executions do none of this themselves.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PolicyError, Skip, StepFailed, StepSkipped, StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.checkpoint.checkpointer import Checkpointer, wait_for_prunes
from interlock.core.checkpoint.manifest import CheckpointInfo
from interlock.core.checkpoint.store import store_for_uri
from interlock.core.failure.taxonomy import Preempted, StepTimeout, qualified_name
from interlock.core.model.codecs import revive, to_jsonable
from interlock.core.model.spec import StepSpec
from interlock.core.model.values import check_output
from interlock.core.run import live
from interlock.core.run.context import StepContext
from interlock.core.run.devices import DEVICE_FACT, detected_device
from interlock.core.run.exporters import export_step
from interlock.core.run.records import Attempt, Fragment, StopMarker
from interlock.core.run.redact import MIN_KNOWN, Redactor
from interlock.core.run.state import RunContext, RunState
from interlock.core.run.tracebacks import user_traceback
from interlock.core.run.usage import AttemptUsage, GpuSampler

if TYPE_CHECKING:
    from interlock.core.failure.decisions import RetryTracker
    from interlock.core.failure.record import Failure
    from interlock.core.run.statestore import DurableState

log = logging.getLogger("interlock.runtime")

__all__ = ["StepResult", "StopRequested", "execute_step", "record_cache_hit"]


@dataclass
class StepResult:
    node: str
    step: str
    outputs: dict[str, Any]
    attempts: list[Attempt]
    started: float
    ended: float
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    written: Any = None  # what the backend's output writer returned (execute_step(write=...))
    device: dict[str, Any] | None = None  # what it ran on (devices.device_record), for billing


# -- resolving user code -------------------------------------------------------------------
def resolve_function(step: StepSpec) -> Callable[..., Any]:
    """Import the step's function by reference ("module:qualname") from the step's image."""
    from interlock.core.model.refs import import_ref

    try:
        obj = import_ref(step.ref)
    except (ImportError, AttributeError) as exc:
        raise StepFailed(
            step.name, FailureKind.FATAL, f"cannot import {step.ref}: {exc}",
            hint="the step's module must be importable in its image (PYTHONPATH / installed package)",
        ) from exc
    return getattr(obj, "fn", obj)  # an il.step wraps the plain function


def outputs_of(step: StepSpec, returned: Any) -> dict[str, Any]:
    """Normalise a return value to {port: value} and check each against its declared type."""
    ports = step.outputs
    if not ports:
        return {}
    if step.output_tuple:
        if not isinstance(returned, tuple) or len(returned) != len(ports):
            raise _output_error(step, f"must return a {step.output_tuple.rsplit(':', 1)[-1]} of {len(ports)} values")
        values = dict(zip((p.name for p in ports), returned, strict=True))
    else:
        values = {ports[0].name: returned}
    for p in ports:
        check_output(values[p.name], p.type, f"step {step.name!r}, output {p.name!r}")
        if p.type.choices:  # an Enum member crosses as its value (a str or int on every backend)
            values[p.name] = to_jsonable(values[p.name], p.type)
    return values


def _as_declared(step: StepSpec, inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs of a named type (an Enum, a dataclass, a pydantic model) as that type, whatever
    form the backend carried them in (a JSON value, a dict): the step gets the same on every one."""
    out = dict(inputs)
    for p in step.inputs:
        if p.type.name and p.name in out:
            out[p.name] = revive(out[p.name], p.type)
    return out


def _output_error(step: StepSpec, msg: str) -> StepFailed:
    return StepFailed(step.name, FailureKind.FATAL, msg)


def _checkpointer(run: RunContext, step: StepSpec, node: str, ctx: StepContext) -> Checkpointer:
    policy = step.checkpoint
    root = (policy.store if policy and policy.store else None) or run.checkpoint_root or str(run.state.checkpoints_dir)
    return _RuntimeCheckpointer(store_for_uri(root), f"{run.pipeline}/{run.run_id}/{node}", keep=policy.keep if policy else 2, ctx=ctx)


class _RuntimeCheckpointer(Checkpointer):
    """A checkpointer that yields to a pending preemption or stop right after a committed save."""

    def __init__(self, *args: Any, ctx: StepContext, **kw: Any):
        super().__init__(*args, **kw)
        self.ctx = ctx

    def wrote(self, seconds: float) -> None:
        self.ctx.usage.add_checkpoint(seconds)

    def committed(self, info: CheckpointInfo) -> None:  # after save() and streamed writes alike
        super().committed(info)
        self.ctx.mark_checkpointed()
        if self.ctx.facts.get("_preemption_requested"):
            raise Preempted(f"preempted: SIGTERM received; checkpoint {info.id} committed before yielding")
        stop = self.ctx.facts.get("_stop_requested")
        if stop:
            raise StopRequested(stop, checkpoint=info.id)


class StopRequested(BaseException):
    """Someone stopped the run (SIGTERM, Ctrl-C) while the step ran; raised into the step.

    A BaseException so that the step's ``except Exception`` lets it through; the shim turns it
    into a STOPPED step and ``StepStopped``, never into a retry.
    """

    def __init__(self, signal_name: str, *, checkpoint: str | None = None, why: str = "") -> None:
        self.signal = signal_name
        self.checkpoint = checkpoint
        super().__init__(f"stopped by {signal_name}{': ' + why if why else ''}")


# A second signal within this window is the same stop delivered twice, not a second request.
DUPLICATE_SIGNAL_S = 1.0
# After a timeout fires, fire again this often until the step ends: the first StepTimeout
# may be caught (a bare except, a retry helper) and the step must still not run on.
TIMEOUT_REARM_S = 0.5


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


KILLED_DECISION = "started; no end was recorded (the process was killed, or it is still running)"


@contextmanager
def _signals(ctx: StepContext, timeout_s: float | None, grace_s: float, *, preempt_on_sigterm: bool = True,
             checkpoints: bool = False) -> Iterator[None]:
    """Guard one attempt: the step's timeout, and what SIGTERM / SIGINT mean while it runs.

    SIGTERM is a preemption only when ``preempt_on_sigterm`` (an interruptible step in a
    cluster's task): ask the step to checkpoint, then PREEMPTED (retried outside the budget).
    Otherwise SIGTERM and SIGINT stop: a step with a checkpoint policy gets ``grace_s`` to
    save (``ctx.checkpoint_due()`` turns True), then ``StopRequested``; one without stops at
    once; a second signal stops at once.

    The timeout raises ``StepTimeout`` (a BaseException) and fires again every
    TIMEOUT_REARM_S until the step ends. On the main thread SIGALRM does this (it also breaks
    a blocking sleep); elsewhere signal handlers cannot be installed, so a watchdog thread
    raises it in the step's thread at its next Python instruction, and the process's own
    SIGTERM/SIGINT handling applies.
    """
    if threading.current_thread() is not threading.main_thread():
        with _watchdog(ctx, timeout_s):
            yield
        return
    deadline = time.monotonic() + timeout_s if timeout_s else None
    state: dict[str, Any] = {"signal_at": None, "signal": None, "preempt": False, "fired": False}

    def on_alarm(signum: int, frame: Any) -> None:
        now = time.monotonic()
        if state["signal_at"] is not None and now >= state["signal_at"]:
            if state["preempt"]:
                raise Preempted(f"preempted: SIGTERM received and no checkpoint within {grace_s:g}s")
            raise StopRequested(state["signal"], why=f"no checkpoint within {grace_s:g}s")
        if deadline is not None and now >= deadline:
            state["fired"] = True
            _arm()
            raise StepTimeout(f"step {ctx.node!r} exceeded its timeout of {timeout_s:g}s")
        _arm()

    def on_signal(signum: int, frame: Any) -> None:
        name = _signal_name(signum)
        if state["signal"] is not None:
            if time.monotonic() - state["signal_seen"] < DUPLICATE_SIGNAL_S:
                return  # the same stop twice (sent to the process group and passed on by a parent)
            raise StopRequested(name, why="second signal")  # asked again: stop now
        state["signal"], state["signal_seen"] = name, time.monotonic()
        state["preempt"] = signum == signal.SIGTERM and preempt_on_sigterm
        if not state["preempt"] and not checkpoints:
            raise StopRequested(name)
        ctx.facts["_preemption_requested" if state["preempt"] else "_stop_requested"] = True if state["preempt"] else name
        ctx.checkpoint_every_s = 0.0  # checkpoint_due() is now True
        state["signal_at"] = time.monotonic() + grace_s
        what = "resume after preemption" if state["preempt"] else "stop"
        log.warning("step %s: %s received; checkpoint within %.0fs, then %s", ctx.node, name, grace_s, what)
        _arm()

    def _arm() -> None:
        due = state["signal_at"]
        if deadline is not None:
            next_timeout = time.monotonic() + TIMEOUT_REARM_S if state["fired"] else deadline
            due = next_timeout if due is None else min(due, next_timeout)
        if due is not None:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, due - time.monotonic()))

    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    old_int = signal.signal(signal.SIGINT, on_signal)
    _arm()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


@contextmanager
def _watchdog(ctx: StepContext, timeout_s: float | None) -> Iterator[None]:
    """Enforce a timeout off the main thread: raise StepTimeout in this thread at the deadline.

    CPython delivers an asynchronous exception at the thread's next bytecode: a pure-Python
    loop stops at once, a blocking C call (a sleep, a read) first returns.
    """
    if not timeout_s:
        yield
        return
    tid = threading.get_ident()
    done = threading.Event()
    lock = threading.Lock()
    message = f"step {ctx.node!r} exceeded its timeout of {timeout_s:g}s"
    # The C API raises a class, not an instance: a subclass carries the message.
    timeout_cls = type("StepTimeout", (StepTimeout,), {"default_message": message, "__module__": StepTimeout.__module__})
    import ctypes  # only a step with a timeout raises into its thread

    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc

    def watch() -> None:
        wait = timeout_s
        while not done.wait(wait):
            with lock:
                if done.is_set():
                    return
                set_async(ctypes.c_ulong(tid), ctypes.py_object(timeout_cls))
            wait = TIMEOUT_REARM_S

    log.debug("step %s runs off the main thread: its timeout is enforced by a watchdog thread", ctx.node)
    watcher = threading.Thread(target=watch, name=f"interlock-timeout-{ctx.node}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        with lock:
            done.set()
            set_async(ctypes.c_ulong(tid), None)  # drop one raised but not yet delivered
        watcher.join()


# -- the shim ------------------------------------------------------------------------------
def _waits_for_prunes(fn: Callable[..., StepResult]) -> Callable[..., StepResult]:
    """A step ends once the checkpoint prunes its saves started (off their path) are done."""

    @functools.wraps(fn)
    def run_then_wait(*args: Any, **kwargs: Any) -> StepResult:
        try:
            return fn(*args, **kwargs)
        finally:
            wait_for_prunes()

    return run_then_wait


@_waits_for_prunes
def execute_step(
    run: RunContext,
    step: StepSpec,
    node: str,
    inputs: dict[str, Any] | Callable[[], dict[str, Any]],
    fn: Callable[..., Any] | None = None,
    write: Callable[[dict[str, Any]], Any] | None = None,
) -> StepResult:
    """Run ``node`` through the shim. ``write`` hands the checked outputs to the backend
    (artifacts, parameters): it runs inside the attempt, so a value that cannot be written
    fails the attempt and is classified, retried or stopped like any failure. ``inputs`` may
    be a function that reads them: called after the stop-marker check, so a refused retry
    reads (and imports) nothing."""
    with live.capture(node):  # what the step prints and logs reaches the run's console, tagged
        return _execute_step(run, step, node, inputs, fn, write)


def _execute_step(
    run: RunContext,
    step: StepSpec,
    node: str,
    inputs: dict[str, Any] | Callable[[], dict[str, Any]],
    fn: Callable[..., Any] | None,
    write: Callable[[dict[str, Any]], Any] | None,
) -> StepResult:
    state = run.state
    durable = None
    if run.state_store:
        from interlock.core.run.statestore import DurableState

        durable = DurableState(run.state_store, run.pipeline, run.run_id)
    if durable is not None:
        durable.pull(state, node)  # a retry in a fresh pod sees what earlier attempts decided
    prior = state.stop_marker(node)
    if prior is not None and prior.kind is StopMarker.STOPPED:
        # A backend retry of a node the user stopped: stop again, at once.
        raise StepStopped(node, prior.failure.message or "a signal", pipeline=run.pipeline)
    if prior is not None:
        refused = prior.refusal()
        raise StepFailed(node, refused.kind, refused.reason, hint=refused.hint, pipeline=run.pipeline, failure=refused)
    if callable(inputs):
        inputs = inputs()
    inputs = _as_declared(step, inputs)
    fn = fn or resolve_function(step)
    classifier = run.classifier  # None: the default rule table, built at the first failure
    # Inputs under credential names (a password parameter passed through) and the values of
    # the step's il.Secret variables are masked in failure messages and facts, which land in
    # fragments, markers, logs and the receipt.
    redactor = Redactor.for_values(inputs).with_known(_secret_values(step)).with_known(_passed_secrets(state, inputs))
    # A backend retry (a new container for the same node) resumes the retry budget where the
    # previous container left it, from the attempts recorded in this node's receipt fragment
    # since the run was last resumed (a resume opens a new budget).
    earlier = state.read_fragment(node)
    base = list(earlier.attempts) if earlier else []
    # The tracker (retry_decisions) is made at the first failure unless earlier ones must replay.
    history = state.failures_since_resume(node) if earlier else []
    tracker = _retry_tracker(step, history) if history else None
    attempts: list[Attempt] = []
    factor = 0.5**tracker.halvings if tracker else 1.0  # an OOM remediation survives a backend retry too
    started = run.clock()
    ctx = StepContext(pipeline=run.pipeline, run_id=run.run_id, node=node, backend=run.backend,
                      state_dir=os.fspath(run.state_dir))
    if step.context_arg:  # only a step that takes the context can reach them (il.map: one per item)
        ctx.checkpoint = _checkpointer(run, step, node, ctx)
        from interlock.core.run.metrics import MetricLog

        ctx.metrics = MetricLog(node, state.metrics_path(node), rank=int(os.environ.get("RANK", "0") or 0))
    while True:
        ctx.attempt = len(attempts) + 1
        ctx.batch_size_factor = factor
        ctx.checkpoint_every_s = step.checkpoint.every_s if step.checkpoint else None
        ctx.facts.pop("_preemption_requested", None)
        ctx.facts.pop("_stop_requested", None)
        ctx.mark_checkpointed()
        t0 = run.clock()
        # Recorded as started before the call: if this process dies (SIGKILL, eviction), the
        # next read (a resume, a backend retry, the receipt) still shows the attempt, as killed.
        begun = Attempt(len(attempts) + 1, t0, t0, Status.KILLED, decision=KILLED_DECISION, batch_size_factor=factor)
        _write_fragment(run, step, StepResult(node, step.name, {}, [*attempts, begun], started, t0, ctx.snapshots),
                        Status.FAILED, base=base, new=earlier is None and not attempts, final=False)
        kwargs = dict(inputs)
        if step.context_arg:
            kwargs[step.context_arg] = ctx
        ctx.usage = AttemptUsage()
        sampler = GpuSampler.if_available()  # NVML only where a GPU is; a step billing none ignores it
        # SIGTERM is a spot reclaim only for an interruptible step in a cluster's task.
        preemptible = step.interruptible and run.on_cluster
        try:
            try:
                with _signals(ctx, step.timeout_s, run.preemption_grace_s, preempt_on_sigterm=preemptible,
                              checkpoints=step.checkpoint is not None):
                    returned = fn(**kwargs)
            except KeyboardInterrupt as exc:  # Ctrl-C where the shim could not install its handler
                raise StopRequested("SIGINT") from exc
            except SystemExit as exc:  # the step's own SIGTERM handler exited: a stop unless preempted
                if exc.code in (143, -15) and not preemptible:
                    raise StopRequested("SIGTERM") from exc
                raise
            except Skip as exc:
                if not step.may_skip:  # a backend rendered no skip-tolerant join for it: a mistake, FATAL
                    raise PolicyError(
                        f"step {step.name!r} raised il.Skip({exc.why!r}) but does not declare may_skip",
                        step=node, hint="declare it: @il.step(may_skip=True)",
                    ) from exc
                raise
            outputs = outputs_of(step, returned)
            written = write(outputs) if write is not None else None
        except Skip as skip:  # il.Skip: the step ends skipped; no retry, no failure
            attempts.append(Attempt(len(attempts) + 1, t0, run.clock(), Status.SKIPPED, None,
                                    f"skipped itself: {skip.why}", 0.0, factor, _usage(ctx, sampler)))
            ctx.facts["skipped"] = skip.why
            result = StepResult(node, step.name, {}, attempts, started, run.clock(), ctx.snapshots,
                                redactor(_public(ctx.facts)), device=_device(ctx, step))
            _write_fragment(run, step, result, Status.SKIPPED, base=base)
            if durable is not None:
                durable.push(state, node)
            raise StepSkipped(node, redactor.text(skip.why) if skip.why else "") from None
        except StopRequested as stop:
            saved = f"checkpoint {stop.checkpoint} committed" if stop.checkpoint else "no checkpoint taken"
            attempts.append(Attempt(
                len(attempts) + 1, t0, run.clock(), Status.STOPPED, None,
                f"{stop}; {saved}; not retried: resume the run to continue", 0.0, factor, _usage(ctx, sampler),
            ))
            log.warning("step %s attempt %d: %s (%s)", node, len(attempts), stop, saved)
            raise _stopped(run, step, node, stop, attempts, started, ctx, base, durable) from stop
        except (Exception, SystemExit, StepTimeout) as exc:  # SystemExit(143) on a cluster: preempted
            # Only a failing step needs the rule table. The traceback quotes the exception's
            # message: redact after adding it.
            from interlock.core.failure.rules import default_classifier

            failure: Failure = redactor.fields(replace((classifier or default_classifier).classify(exc), traceback=user_traceback(exc) or None))
            tracker = tracker or _retry_tracker(step, [])
            decision = tracker.decide(failure)
            retry_here = decision.retry and step.retry.retried_in_process(failure.kind, run.retry_in_process)
            attempts.append(Attempt(
                len(attempts) + 1, t0, run.clock(), Status.FAILED, failure.to_dict(), decision.reason,
                decision.delay_s if retry_here else 0.0, factor, _usage(ctx, sampler),
            ))
            counted, decided = _decided(failure, decision.reason)
            log.warning("step %s attempt %d: %s (%s) -> %s", node, len(attempts), failure.reason, counted, decided)
            if retry_here:
                if decision.remediation:
                    factor *= decision.remediation.get("batch_size_factor", 1.0)
                if decision.delay_s:
                    try:
                        run.sleeper(decision.delay_s)
                    except (StopRequested, KeyboardInterrupt) as waiting:  # stopped while waiting to retry
                        why = waiting if isinstance(waiting, StopRequested) else StopRequested("SIGINT")
                        raise _stopped(run, step, node, why, attempts, started, ctx, base, durable) from waiting
                continue
            if not decision.retry:  # no retry anywhere: a backend retry of this node must end at once
                fatal = failure.kind is FailureKind.FATAL and not step.retry.retries_any
                marked = failure if fatal else replace(
                    failure, reason=decision.reason.removeprefix(f"{failure.kind}: "))  # "...; giving up after 2 retries"
                state.write_marker(node, marked, StopMarker.FATAL if fatal else StopMarker.EXHAUSTED)
            result = StepResult(
                node, step.name, {}, attempts, started, run.clock(), ctx.snapshots, redactor(_public(ctx.facts)),
                device=_device(ctx, step),
            )
            _write_fragment(run, step, result, Status.FAILED, base=base)
            if durable is not None:
                durable.push(state, node)
            err = StepFailed(
                node, failure.kind, failure.reason, hint=failure.hint, attempts=len(attempts),
                pipeline=run.pipeline, failure=failure, attempt_log=attempts,
                # The taxonomy allows a retry that the shim did not make here: the backend should.
                backend_should_retry=decision.retry and not retry_here,
            )
            err.redact_text = redactor.text
            raise err from exc
        attempts.append(Attempt(len(attempts) + 1, t0, run.clock(), Status.SUCCEEDED, batch_size_factor=factor,
                                usage=_usage(ctx, sampler)))
        if redactor.known:
            _note_secret_outputs(state, node, redactor, outputs)
        result = StepResult(
            node, step.name, outputs, attempts, started, run.clock(), ctx.snapshots, redactor(_public(ctx.facts)),
            written, device=_device(ctx, step),
        )
        _write_fragment(run, step, result, Status.SUCCEEDED, base=base)
        if durable is not None:
            durable.push(state, node)
        return result


def _secret_values(step: StepSpec) -> list[str]:
    """What the step's il.Secret references hold here (the backend injected them as variables)."""
    return [v for s in step.secrets if (v := os.environ.get(s.env_var))]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _passed_secrets(state: RunState, inputs: dict[str, Any]) -> list[str]:
    """The inputs that an earlier step returned holding a secret (a password passed through
    an output): known by their digest (``_note_secret_outputs``), whatever the port's name."""
    texts = [t for t in _strings(inputs) if len(t) >= MIN_KNOWN]
    if not texts:
        return []
    digests = state.secret_digests()
    return [t for t in texts if state.secret_digest(t) in digests] if digests else []


def _note_secret_outputs(state: RunState, node: str, redactor: Redactor, outputs: dict[str, Any]) -> None:
    held = [t for t in _strings(outputs) if any(k in t for k in redactor.known)]
    if held:
        state.write_secret_digests(node, (state.secret_digest(t) for t in held))


def _decided(failure: Failure, reason: str) -> tuple[str, str]:
    """A retry decision's text ("FATAL 1/3: <failure>; retrying now ...") as (its kind and
    count, what was decided): the attempt's line names the failure once, then the decision."""
    head, sep, rest = reason.partition(f": {failure.reason}; ")
    return (head, rest) if sep and head.startswith(str(failure.kind)) else (str(failure.kind), reason)


def _retry_tracker(step: StepSpec, history: list[Failure]) -> RetryTracker:
    from interlock.core.failure.decisions import RetryTracker

    return RetryTracker.replay(step.retry, history)


def _stopped(
    run: RunContext, step: StepSpec, node: str, stop: StopRequested, attempts: list[Attempt], started: float,
    ctx: StepContext, base: list[Attempt], durable: DurableState | None,
) -> StepStopped:
    """Record the node as STOPPED, with a marker that stops a backend retry (KFP retries any
    non-zero exit) and that resuming the run clears; kept in the durable state store too,
    where there is one: the backend's retry runs in a fresh pod."""
    ctx.facts["stopped_by"] = stop.signal
    if stop.checkpoint:
        ctx.facts["checkpoint_at_stop"] = stop.checkpoint
    result = StepResult(node, step.name, {}, attempts, started, run.clock(), ctx.snapshots, _public(ctx.facts))
    _write_fragment(run, step, result, Status.STOPPED, base=base)
    from interlock.core.failure.record import Failure

    run.state.write_marker(node, Failure(
        FailureKind.FATAL, str(stop), hint="resume the run to continue", rule="stopped",
        exc_type=qualified_name(StopRequested), message=stop.signal,
    ), StopMarker.STOPPED)
    if durable is not None:
        durable.push(run.state, node)
    return StepStopped(
        node, stop.signal, attempts=max(len(attempts), 1), checkpoint=stop.checkpoint, pipeline=run.pipeline,
        attempt_log=attempts,
    )


def _usage(ctx: StepContext, sampler: GpuSampler | None) -> dict[str, Any]:
    """The attempt's measured usage; stops its GPU sampler (the attempt is over)."""
    if sampler is not None:
        ctx.usage.gpu = sampler.stop()
    return ctx.usage.to_dict()


def _public(facts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in facts.items() if not k.startswith("_")}


def _device(ctx: StepContext, step: StepSpec) -> dict[str, Any]:
    """What the step ran on, for billing: as it said (ctx.report_device), else as seen here."""
    # Per process: a distributed step's rank records its own share; the receipt sums the ranks.
    return ctx.facts.get(DEVICE_FACT) or detected_device(step.resources.gpu)


def record_cache_hit(run: RunContext, step: StepSpec, node: str, provenance: dict[str, Any]) -> None:
    """A fragment for a node served from cache: no attempts, but the data snapshots it stands on."""
    now = run.clock()
    result = StepResult(node, step.name, {}, [], now, now, list(provenance.get("snapshots", [])),
                        {**provenance.get("facts", {}), "cached_from_run": provenance.get("run_id")})
    _write_fragment(run, step, result, Status.CACHED)


def _write_fragment(
    run: RunContext, step: StepSpec, result: StepResult, status: Status, *, base: list[Attempt] | None = None,
    new: bool = False, final: bool = True,
) -> None:
    """One receipt fragment per node; a backend retry of the step appends its attempts to
    ``base`` (the attempts recorded before this execution; default: what the fragment holds).
    ``new``: no fragment was found for the node (its first write needs no rename). ``final``:
    the node ended (not the record of an attempt begun): the metrics exporters see it."""
    state = run.state
    previous = state.read_fragment(result.node) if base is None else None
    fragment = Fragment(
        run_id=run.run_id,
        node=result.node,
        step=step.name,
        status=status,
        fingerprint=step.fingerprint,
        image=step.image,
        started=result.started,
        ended=result.ended,
        attempts=(base if base is not None else previous.attempts if previous else []) + list(result.attempts),
        snapshots=result.snapshots,
        facts=result.facts,
        device=result.device,
        resources=step.resources.to_json(),
        distributed=step.distributed.to_json() if step.distributed else None,
    )
    state.write_fragment(fragment, new=new)
    if final:
        export_step(run.pipeline, run.run_id, run.backend, step, fragment)


