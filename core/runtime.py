"""The runtime shim: the one piece of code that executes a step, on every backend.

Backends only schedule. Inside whatever process or container a backend gives a step, the
shim does the same work: refuse to redo a step that already failed FATAL in this run,
build the step context (checkpointer keyed stably across retries), call the function,
classify a failure, retry in-process where the backend cannot (or should not), turn
SIGTERM into PREEMPTED after letting the step checkpoint, check the outputs, and write a
receipt fragment. flytekit's and kfp's local executions do none of this themselves.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .checkpoint import Checkpointer, CheckpointInfo, store_for_uri
from .context import StepContext
from .devices import DEVICE_FACT, detected_device
from .errors import StepFailed
from .failures import Failure, FailureKind, Preempted, default_classifier
from .redact import Redactor
from .retry import RetryTracker
from .runstate import ALL_KINDS, Attempt, Fragment, RunContext, StopMarker
from .spec import StepSpec
from .status import Status
from .values import check_output

log = logging.getLogger("interlock.runtime")

# RunContext, Attempt and ALL_KINDS live in runstate (the run's state); re-exported here
# because the shim is where steps meet them.
__all__ = ["ALL_KINDS", "Attempt", "RunContext", "StepResult", "StepTimeout", "execute_step", "record_cache_hit"]


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
    device: dict[str, Any] | None = None  # what it ran on (devices.device_record), for billing


# -- resolving user code -------------------------------------------------------------------
def resolve_function(step: StepSpec) -> Callable[..., Any]:
    """Import the step's function by reference ("module:qualname") from the step's image."""
    from .loader import import_ref

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
    return values


def _output_error(step: StepSpec, msg: str) -> StepFailed:
    return StepFailed(step.name, FailureKind.FATAL, msg)


def _checkpointer(run: RunContext, step: StepSpec, node: str, ctx: StepContext) -> Checkpointer:
    policy = step.checkpoint
    root = (policy.store if policy and policy.store else None) or run.checkpoint_root or str(run.state.checkpoints_dir)
    return _RuntimeCheckpointer(store_for_uri(root), f"{run.pipeline}/{run.run_id}/{node}", keep=policy.keep if policy else 2, ctx=ctx)


class _RuntimeCheckpointer(Checkpointer):
    """A checkpointer that yields to a pending preemption right after a committed save."""

    def __init__(self, *args: Any, ctx: StepContext, **kw: Any):
        super().__init__(*args, **kw)
        self.ctx = ctx

    def save(self, state: Any, **kw: Any) -> CheckpointInfo:
        info = super().save(state, **kw)
        self.ctx.mark_checkpointed()
        if self.ctx.facts.get("_preemption_requested"):
            raise Preempted(f"preempted: SIGTERM received; checkpoint {info.id} committed before yielding")
        return info


KILLED_DECISION = "started; no end was recorded (the process was killed, or it is still running)"


class StepTimeout(TimeoutError):
    """The step ran past its declared timeout (enforced by the shim where the backend does not)."""


@contextmanager
def _signals(ctx: StepContext, timeout_s: float | None, grace_s: float) -> Iterator[None]:
    """SIGTERM -> ask the step to checkpoint, then PREEMPTED; SIGALRM enforces timeout and grace.

    Signals can only be handled on the main thread; elsewhere the step runs unguarded (the
    backend's own timeout and eviction still apply).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    deadline = time.monotonic() + timeout_s if timeout_s else None
    state: dict[str, float | None] = {"preempt_at": None}

    def on_alarm(signum: int, frame: Any) -> None:
        now = time.monotonic()
        if state["preempt_at"] is not None and now >= state["preempt_at"]:
            raise Preempted(f"preempted: SIGTERM received and no checkpoint within {grace_s:g}s")
        if deadline is not None and now >= deadline:
            raise StepTimeout(f"step {ctx.node!r} exceeded its timeout of {timeout_s:g}s")
        _arm()

    def on_term(signum: int, frame: Any) -> None:
        ctx.facts["_preemption_requested"] = True
        ctx.checkpoint_every_s = 0.0  # checkpoint_due() is now True
        state["preempt_at"] = time.monotonic() + grace_s
        log.warning("step %s: SIGTERM received; checkpoint within %.0fs to resume after preemption", ctx.node, grace_s)
        _arm()

    def _arm() -> None:
        candidates = [t for t in (deadline, state["preempt_at"]) if t is not None]
        if candidates:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, min(candidates) - time.monotonic()))

    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    old_term = signal.signal(signal.SIGTERM, on_term)
    _arm()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGTERM, old_term)


# -- the shim ------------------------------------------------------------------------------
def execute_step(
    run: RunContext,
    step: StepSpec,
    node: str,
    inputs: dict[str, Any],
    fn: Callable[..., Any] | None = None,
) -> StepResult:
    state = run.state
    prior = state.read_marker(node, StopMarker.FATAL)
    if prior is not None:
        refused = prior.refusal()
        raise StepFailed(node, refused.kind, refused.reason, hint=refused.hint, pipeline=run.pipeline, failure=refused)
    fn = fn or resolve_function(step)
    classifier = run.classifier or default_classifier
    # Inputs under credential names (a password parameter passed through) are masked in
    # failure messages and facts, which land in fragments, logs and the receipt.
    redactor = Redactor.for_values(inputs)
    # A backend retry (a new container for the same node) resumes the retry budget where the
    # previous container left it, from the attempts recorded in this node's receipt fragment.
    earlier = state.read_fragment(node)
    base = list(earlier.attempts) if earlier else []
    tracker = RetryTracker.replay(step.retry, earlier.failures() if earlier else [])
    attempts: list[Attempt] = []
    factor = 0.5**tracker.halvings  # an OOM remediation survives a backend retry too
    started = run.clock()
    ctx = StepContext(pipeline=run.pipeline, run_id=run.run_id, node=node, backend=run.backend)
    ctx.checkpoint = _checkpointer(run, step, node, ctx)
    while True:
        ctx.attempt = len(attempts) + 1
        ctx.batch_size_factor = factor
        ctx.checkpoint_every_s = step.checkpoint.every_s if step.checkpoint else None
        ctx.facts.pop("_preemption_requested", None)
        ctx.mark_checkpointed()
        t0 = run.clock()
        # Recorded as started before the call: if this process dies (SIGKILL, eviction), the
        # next read (a resume, a backend retry, the receipt) still shows the attempt, as killed.
        begun = Attempt(len(attempts) + 1, t0, t0, Status.KILLED, decision=KILLED_DECISION, batch_size_factor=factor)
        _write_fragment(run, step, StepResult(node, step.name, {}, [*attempts, begun], started, t0, ctx.snapshots),
                        Status.FAILED, base=base)
        kwargs = dict(inputs)
        if step.context_arg:
            kwargs[step.context_arg] = ctx
        try:
            with _signals(ctx, step.timeout_s, run.preemption_grace_s):
                returned = fn(**kwargs)
            outputs = outputs_of(step, returned)
        except (Exception, SystemExit) as exc:  # SystemExit(143): the process was told to stop
            failure: Failure = redactor.fields(classifier.classify(exc))
            decision = tracker.decide(failure)
            retry_here = decision.retry and failure.kind in run.retry_in_process
            attempts.append(Attempt(
                len(attempts) + 1, t0, run.clock(), Status.FAILED, failure.to_dict(), decision.reason,
                decision.delay_s if retry_here else 0.0, factor,
            ))
            log.warning("step %s attempt %d: %s (%s) -> %s", node, len(attempts), failure.reason, failure.kind, decision.reason)
            if retry_here:
                if decision.remediation:
                    factor *= decision.remediation.get("batch_size_factor", 1.0)
                if decision.delay_s:
                    run.sleeper(decision.delay_s)
                continue
            if failure.kind is FailureKind.FATAL:
                state.write_marker(node, failure, StopMarker.FATAL)
            result = StepResult(
                node, step.name, {}, attempts, started, run.clock(), ctx.snapshots, redactor(_public(ctx.facts)),
                device=_device(ctx, step),
            )
            _write_fragment(run, step, result, Status.FAILED, base=base)
            raise StepFailed(
                node, failure.kind, failure.reason, hint=failure.hint, attempts=len(attempts),
                pipeline=run.pipeline, failure=failure, attempt_log=attempts,
                # The taxonomy allows a retry that the shim did not make here: the backend should.
                backend_should_retry=decision.retry and not retry_here,
            ) from exc
        attempts.append(Attempt(len(attempts) + 1, t0, run.clock(), Status.SUCCEEDED, batch_size_factor=factor))
        result = StepResult(
            node, step.name, outputs, attempts, started, run.clock(), ctx.snapshots, redactor(_public(ctx.facts)),
            device=_device(ctx, step),
        )
        _write_fragment(run, step, result, Status.SUCCEEDED, base=base)
        return result


def _public(facts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in facts.items() if not k.startswith("_")}


def _device(ctx: StepContext, step: StepSpec) -> dict[str, Any]:
    """What the step ran on, for billing: as it said (ctx.report_device), else as seen here."""
    return ctx.facts.get(DEVICE_FACT) or detected_device(step.gpus)


def record_cache_hit(run: RunContext, step: StepSpec, node: str, provenance: dict[str, Any]) -> None:
    """A fragment for a node served from cache: no attempts, but the data snapshots it stands on."""
    now = run.clock()
    result = StepResult(node, step.name, {}, [], now, now, list(provenance.get("snapshots", [])),
                        {**provenance.get("facts", {}), "cached_from_run": provenance.get("run_id")})
    _write_fragment(run, step, result, Status.CACHED)


def _write_fragment(
    run: RunContext, step: StepSpec, result: StepResult, status: Status, *, base: list[Attempt] | None = None,
) -> None:
    """One receipt fragment per node; a backend retry of the step appends its attempts to
    ``base`` (the attempts recorded before this execution; default: what the fragment holds)."""
    state = run.state
    previous = state.read_fragment(result.node) if base is None else None
    state.write_fragment(Fragment(
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
    ))
