"""The runtime shim: the one piece of code that executes a step, on every backend.

Backends only schedule. Inside whatever process or container a backend gives a step, the
shim does the same work: refuse to redo a step that already failed FATAL in this run,
build the step context (checkpointer keyed stably across retries), call the function,
classify a failure, retry in-process where the backend cannot (or should not), turn
SIGTERM into PREEMPTED after letting the step checkpoint, check the outputs, and write a
receipt fragment. flytekit's and kfp's local executions do none of this themselves.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checkpoint import Checkpointer, CheckpointInfo, store_for_uri
from .context import StepContext
from .errors import PolicyError, StepFailed
from .failures import Failure, FailureKind, Preempted, default_classifier
from .retry import RetryTracker
from .spec import StepSpec
from .values import check_output

log = logging.getLogger("interlock.runtime")

ALL_KINDS = frozenset(FailureKind)


@dataclass
class RunContext:
    """Where one run's state lives and how the shim may retry, the same on every backend."""

    pipeline: str
    run_id: str
    backend: str
    state_dir: Path
    retry_in_process: frozenset[FailureKind] = ALL_KINDS
    sleeper: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    checkpoint_root: str | None = None  # default: state_dir/checkpoints (a run's own folder)
    preemption_grace_s: float = 20.0
    classifier: Any = None  # a failures.Classifier; None = the default rule table

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir)

    def to_env(self) -> dict[str, str]:
        """What a child process (a container, a kfp subprocess) needs to rebuild this context."""
        return {
            "INTERLOCK_PIPELINE": self.pipeline,
            "INTERLOCK_RUN_ID": self.run_id,
            "INTERLOCK_BACKEND": self.backend,
            "INTERLOCK_STATE_DIR": str(self.state_dir),
            "INTERLOCK_RETRY_IN_PROCESS": ",".join(sorted(k.value for k in self.retry_in_process)),
            **({"INTERLOCK_CHECKPOINT_ROOT": self.checkpoint_root} if self.checkpoint_root else {}),
        }

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> RunContext:
        env = dict(os.environ if env is None else env)
        kinds = env.get("INTERLOCK_RETRY_IN_PROCESS")
        values: dict[str, Any] = {
            "pipeline": env.get("INTERLOCK_PIPELINE", "unknown"),
            "run_id": env.get("INTERLOCK_RUN_ID", "unknown"),
            "backend": env.get("INTERLOCK_BACKEND", "unknown"),
            "state_dir": Path(env.get("INTERLOCK_STATE_DIR", ".interlock/state")),
            "retry_in_process": frozenset(FailureKind(k) for k in kinds.split(",") if k) if kinds is not None else ALL_KINDS,
            "checkpoint_root": env.get("INTERLOCK_CHECKPOINT_ROOT"),
        }
        values.update(overrides)
        return cls(**values)


@dataclass
class Attempt:
    number: int
    started: float
    ended: float
    status: str  # "succeeded" | "failed"
    failure: dict[str, Any] | None = None
    decision: str | None = None
    delay_s: float = 0.0
    batch_size_factor: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "started": self.started,
            "ended": self.ended,
            "duration_s": round(self.ended - self.started, 6),
            "status": self.status,
            "failure": self.failure,
            "decision": self.decision,
            "delay_s": self.delay_s,
            "batch_size_factor": self.batch_size_factor,
        }


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


# -- resolving user code -------------------------------------------------------------------
def resolve_function(step: StepSpec) -> Callable[..., Any]:
    """Import the step's function by reference ("module:qualname") from the step's image."""
    from .loader import import_ref

    try:
        obj = import_ref(step.ref)
    except (ImportError, AttributeError) as exc:
        raise StepFailed(
            step.name, "FATAL", f"cannot import {step.ref}: {exc}",
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
    return StepFailed(step.name, "FATAL", msg)


# -- markers and fragments -----------------------------------------------------------------
def marker_path(run: RunContext, node: str) -> Path:
    return run.state_dir / "markers" / f"{node}.fatal.json"


def fragment_path(run: RunContext, node: str) -> Path:
    return run.state_dir / "receipts" / f"{node}.json"


def _write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=1, default=str))
    os.replace(tmp, path)


def _checkpointer(run: RunContext, step: StepSpec, node: str, ctx: StepContext) -> Checkpointer:
    policy = step.checkpoint
    root = (policy.store if policy and policy.store else None) or run.checkpoint_root or str(run.state_dir / "checkpoints")
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
    marker = marker_path(run, node)
    prior = _same_run(run, marker)
    if prior is not None:
        raise StepFailed(
            node, "FATAL",
            f"already failed FATAL earlier in run {run.run_id}: {prior['failure']['reason']} "
            "(not re-running: a retry cannot fix it)",
            hint=prior["failure"].get("hint") or "fix the cause and start a new run",
            pipeline=run.pipeline,
        )
    fn = fn or resolve_function(step)
    classifier = run.classifier or default_classifier
    # A backend retry (a new container for the same node) resumes the retry budget where the
    # previous container left it, from the attempts recorded in this node's receipt fragment.
    tracker = RetryTracker.replay(step.retry, _earlier_failures(run, node))
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
        kwargs = dict(inputs)
        if step.context_arg:
            kwargs[step.context_arg] = ctx
        try:
            with _signals(ctx, step.timeout_s, run.preemption_grace_s):
                returned = fn(**kwargs)
            outputs = outputs_of(step, returned)
        except (Exception, SystemExit) as exc:  # SystemExit(143): the process was told to stop
            failure: Failure = classifier.classify(exc)
            decision = tracker.decide(failure)
            retry_here = decision.retry and failure.kind in run.retry_in_process
            attempts.append(Attempt(
                len(attempts) + 1, t0, run.clock(), "failed", failure.to_dict(), decision.reason,
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
                _write_json_atomic(marker, {"node": node, "run_id": run.run_id, "failure": failure.to_dict()})
            result = StepResult(node, step.name, {}, attempts, started, run.clock(), ctx.snapshots, _public(ctx.facts))
            _write_fragment(run, step, result, "failed")
            err = StepFailed(
                node, failure.kind.value, failure.reason, hint=failure.hint, attempts=len(attempts),
                pipeline=run.pipeline,
            )
            err.failure = failure  # type: ignore[attr-defined]
            err.attempt_log = attempts  # type: ignore[attr-defined]
            # Retryable by the backend when the taxonomy allows it but it was not done here.
            err.retryable = decision.retry and not retry_here
            raise err from exc
        attempts.append(Attempt(len(attempts) + 1, t0, run.clock(), "succeeded", batch_size_factor=factor))
        result = StepResult(node, step.name, outputs, attempts, started, run.clock(), ctx.snapshots, _public(ctx.facts))
        _write_fragment(run, step, result, "succeeded")
        return result


def _same_run(run: RunContext, path: Path) -> dict[str, Any] | None:
    """A marker or fragment written by this run, or None.

    A state directory may outlive a run (a PVC shared by every KFP run): what an earlier run
    left there must neither block nor spend the budget of this one.
    """
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("run_id", run.run_id) != run.run_id:
        return None
    return data


def _earlier_failures(run: RunContext, node: str) -> list[Failure]:
    fragment = _same_run(run, fragment_path(run, node))
    if fragment is None:
        return []
    try:
        attempts = fragment.get("attempts", [])
        return [Failure.from_dict(a["failure"]) for a in attempts if a.get("failure")]
    except (ValueError, KeyError, TypeError, PolicyError):
        return []


def _public(facts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in facts.items() if not k.startswith("_")}


def record_cache_hit(run: RunContext, step: StepSpec, node: str, provenance: dict[str, Any]) -> None:
    """A fragment for a node served from cache: no attempts, but the data snapshots it stands on."""
    now = run.clock()
    result = StepResult(node, step.name, {}, [], now, now, list(provenance.get("snapshots", [])),
                        {**provenance.get("facts", {}), "cached_from_run": provenance.get("run_id")})
    _write_fragment(run, step, result, "cached")


def _write_fragment(run: RunContext, step: StepSpec, result: StepResult, status: str) -> None:
    """One receipt fragment per node; a backend retry of the step appends its attempts."""
    path = fragment_path(run, result.node)
    previous: list[dict[str, Any]] = (_same_run(run, path) or {}).get("attempts", [])
    _write_json_atomic(path, {
        "run_id": run.run_id,
        "node": result.node,
        "step": step.name,
        "status": status,
        "fingerprint": step.fingerprint,
        "image": step.image,
        "started": result.started,
        "ended": result.ended,
        "attempts": previous + [a.to_dict() for a in result.attempts],
        "snapshots": result.snapshots,
        "facts": result.facts,
        "resources": step.resources.to_json(),
        "distributed": step.distributed.to_json() if step.distributed else None,
    })
