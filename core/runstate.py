"""A run's state: the one place that knows where it lives, how it is named and what it means.

Every backend runs steps through the runtime shim, and the shim leaves its state in one
directory per run:

    <state_dir>/receipts/<node>.json       a Fragment per node: status, attempts, snapshots
    <state_dir>/markers/<node>.<kind>.json  a Marker: "stop, do not run this node again"
    <state_dir>/receipt.json               the run's receipt, merged from the fragments

A child process (a kfp subprocess, a container, a torch worker) finds the run through the
environment: ``RunEnv`` is the only code that spells those variable names, and
``RunContext.to_env()/from_env()`` the only way across. At the end of a run ``settle``
turns the spec, the fragments and what the backend saw into each step's outcome and the
first failure, with one rule for every backend: a node behind a closed ``il.when`` gate is
SKIPPED, a node an earlier failure kept from running is NOT_RUN.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from .errors import PolicyError, RunFailed, StepFailed
from .failures import Failure
from .spec import PipelineSpec
from .status import FailureKind, Status

log = logging.getLogger("interlock.runstate")

ALL_KINDS = frozenset(FailureKind)


# -- the environment contract ----------------------------------------------------------------
class EnvName:
    """The environment variables a run is passed through. Spelled nowhere else."""

    PIPELINE = "INTERLOCK_PIPELINE"
    RUN_ID = "INTERLOCK_RUN_ID"
    BACKEND = "INTERLOCK_BACKEND"  # also il.run's default backend outside a step
    STATE_DIR = "INTERLOCK_STATE_DIR"
    # A directory shared by runs (a KFP state volume): the state is STATE_ROOT/runs/<run id>/state.
    STATE_ROOT = "INTERLOCK_STATE_ROOT"
    RETRY_IN_PROCESS = "INTERLOCK_RETRY_IN_PROCESS"
    CHECKPOINT_ROOT = "INTERLOCK_CHECKPOINT_ROOT"
    # The run id as the orchestrator knows it, when INTERLOCK_RUN_ID cannot be set at compile
    # time: the kfp adapter maps the pod's `pipeline/runid` label to it (downward API).
    ORCHESTRATOR_RUN_ID = "KFP_RUN_ID"


@dataclass(frozen=True)
class RunEnv:
    """The environment contract, each field None when its variable is not set."""

    pipeline: str | None = None
    run_id: str | None = None
    backend: str | None = None
    state_dir: Path | None = None
    state_root: Path | None = None
    retry_in_process: frozenset[FailureKind] | None = None
    checkpoint_root: str | None = None

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> RunEnv:
        env = os.environ if env is None else env
        kinds = env.get(EnvName.RETRY_IN_PROCESS)
        state_dir, state_root = env.get(EnvName.STATE_DIR), env.get(EnvName.STATE_ROOT)
        return cls(
            pipeline=env.get(EnvName.PIPELINE) or None,
            run_id=env.get(EnvName.RUN_ID) or env.get(EnvName.ORCHESTRATOR_RUN_ID) or None,
            backend=env.get(EnvName.BACKEND) or None,
            state_dir=Path(state_dir) if state_dir else None,
            state_root=Path(state_root) if state_root else None,
            retry_in_process=frozenset(FailureKind(k) for k in kinds.split(",") if k) if kinds is not None else None,
            checkpoint_root=env.get(EnvName.CHECKPOINT_ROOT) or None,
        )

    def to_env(self) -> dict[str, str]:
        """The variables for the fields that are set."""
        values = {
            EnvName.PIPELINE: self.pipeline,
            EnvName.RUN_ID: self.run_id,
            EnvName.BACKEND: self.backend,
            EnvName.STATE_DIR: str(self.state_dir) if self.state_dir is not None else None,
            EnvName.STATE_ROOT: str(self.state_root) if self.state_root is not None else None,
            EnvName.RETRY_IN_PROCESS: (
                ",".join(sorted(k.value for k in self.retry_in_process)) if self.retry_in_process is not None else None
            ),
            EnvName.CHECKPOINT_ROOT: self.checkpoint_root,
        }
        return {k: v for k, v in values.items() if v is not None}

    def run_state_dir(self) -> Path | None:
        """STATE_DIR, else the run's own folder under STATE_ROOT (when the run id is known)."""
        if self.state_dir is not None:
            return self.state_dir
        if self.state_root is not None and self.run_id:
            return state_dir_under(self.state_root, self.run_id)
        return None


@contextmanager
def exported(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of a run (its child processes read them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- layout ------------------------------------------------------------------------------------
def run_dir_under(root: Path, run_id: str) -> Path:
    """A run's folder in a work directory or a volume shared by runs."""
    return Path(root) / "runs" / run_id


def state_dir_of(run_dir: Path) -> Path:
    """Where the shim's state lives inside a run's folder."""
    return Path(run_dir) / "state"


def state_dir_under(root: Path, run_id: str) -> Path:
    return state_dir_of(run_dir_under(root, run_id))


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

    @property
    def state(self) -> RunState:
        return RunState(self.state_dir, self.run_id)

    def to_env(self) -> dict[str, str]:
        """What a child process (a container, a kfp subprocess) needs to rebuild this context."""
        return RunEnv(
            pipeline=self.pipeline, run_id=self.run_id, backend=self.backend, state_dir=self.state_dir,
            retry_in_process=self.retry_in_process, checkpoint_root=self.checkpoint_root,
        ).to_env()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RunContext:
        seen = RunEnv.read(env)
        run_id = overrides.get("run_id") or seen.run_id or "unknown"
        values: dict[str, Any] = {
            "pipeline": seen.pipeline or "unknown",
            "run_id": run_id,
            "backend": seen.backend or "unknown",
            "state_dir": replace(seen, run_id=run_id).run_state_dir() or Path(".interlock/state"),
            "retry_in_process": seen.retry_in_process if seen.retry_in_process is not None else ALL_KINDS,
            "checkpoint_root": seen.checkpoint_root,
        }
        values.update(overrides)
        return cls(**values)


# -- fragments ---------------------------------------------------------------------------------
@dataclass
class Attempt:
    """One attempt of a step, as the shim recorded it."""

    number: int
    started: float
    ended: float
    status: Status  # SUCCEEDED | FAILED
    failure: dict[str, Any] | None = None  # Failure.to_dict(): receipts keep the JSON form
    decision: str | None = None
    delay_s: float = 0.0
    batch_size_factor: float = 1.0

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def duration_s(self) -> float:
        return round(self.ended - self.started, 6)

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "started": self.started,
            "ended": self.ended,
            "duration_s": self.duration_s,
            "status": self.status,
            "failure": self.failure,
            "decision": self.decision,
            "delay_s": self.delay_s,
            "batch_size_factor": self.batch_size_factor,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attempt:
        started = float(d.get("started", 0.0))
        return cls(
            number=int(d.get("number", 0)),
            started=started,
            ended=float(d.get("ended", started + float(d.get("duration_s", 0.0)))),
            status=Status(d.get("status", Status.FAILED)),
            failure=d.get("failure"),
            decision=d.get("decision"),
            delay_s=float(d.get("delay_s", 0.0)),
            batch_size_factor=float(d.get("batch_size_factor", 1.0)),
        )

    def failure_record(self) -> Failure | None:
        """The recorded failure, typed; None when there is none or it cannot be read back."""
        if not self.failure:
            return None
        try:
            return Failure.from_dict(self.failure)
        except (PolicyError, TypeError, ValueError):
            return None


@dataclass
class Fragment:
    """What the shim recorded about one node in one run: the receipt is merged from these."""

    run_id: str
    node: str
    step: str
    status: Status  # SUCCEEDED | FAILED | CACHED
    fingerprint: str | None = None
    image: str | None = None
    started: float = 0.0
    ended: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    distributed: dict[str, Any] | None = None
    device: dict[str, Any] | None = None  # what the step ran on (core/devices.py): GPU billing

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def duration_s(self) -> float:
        return round(self.ended - self.started, 6)

    def last_failure(self) -> dict[str, Any] | None:
        failures = [a.failure for a in self.attempts if a.failure]
        return failures[-1] if failures else None

    def failures(self) -> list[Failure]:
        return [f for f in (a.failure_record() for a in self.attempts) if f is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "node": self.node,
            "step": self.step,
            "status": self.status,
            "fingerprint": self.fingerprint,
            "image": self.image,
            "started": self.started,
            "ended": self.ended,
            "attempts": [a.to_dict() for a in self.attempts],
            "snapshots": self.snapshots,
            "facts": self.facts,
            "resources": self.resources,
            "distributed": self.distributed,
            "device": self.device,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, run_id: str, node: str) -> Fragment:
        return cls(
            run_id=d.get("run_id", run_id),
            node=d.get("node", node),
            step=d.get("step", node),
            status=Status(d.get("status", Status.FAILED)),
            fingerprint=d.get("fingerprint"),
            image=d.get("image"),
            started=float(d.get("started", 0.0)),
            ended=float(d.get("ended", 0.0)),
            attempts=[Attempt.from_dict(a) for a in d.get("attempts", [])],
            snapshots=list(d.get("snapshots", [])),
            facts=dict(d.get("facts", {})),
            resources=dict(d.get("resources", {})),
            distributed=d.get("distributed"),
            device=d.get("device"),
        )


# -- markers -----------------------------------------------------------------------------------
class StopMarker(StrEnum):
    """Why a node must not run again in this run (one file per node and kind)."""

    FATAL = "fatal"  # it failed FATAL: a backend retry (KFP retries everything) cannot help


@dataclass(frozen=True)
class Marker:
    kind: StopMarker
    node: str
    run_id: str
    failure: Failure

    def refusal(self) -> Failure:
        """The failure the shim reports when it refuses to run the node again."""
        f = self.failure
        return replace(
            f, reason=f"already failed {f.kind} earlier in run {self.run_id}: {f.reason} (not re-running: a retry cannot fix it)",
            hint=f.hint or "fix the cause and start a new run",
        )


# -- one run's directory -----------------------------------------------------------------------
@dataclass(frozen=True)
class RunState:
    """One run's state directory. Reads see only what this run wrote.

    A state directory may outlive a run (a PVC shared by every KFP run, a reused run id):
    what another run left there must neither block, nor spend the budget of, nor leak into
    the receipt of this one.
    """

    state_dir: Path
    run_id: str

    def fragment_path(self, node: str) -> Path:
        return Path(self.state_dir) / "receipts" / f"{node}.json"

    def marker_path(self, node: str, kind: StopMarker = StopMarker.FATAL) -> Path:
        return Path(self.state_dir) / "markers" / f"{node}.{kind.value}.json"

    @property
    def receipt_path(self) -> Path:
        return Path(self.state_dir) / "receipt.json"

    @property
    def checkpoints_dir(self) -> Path:
        """The default checkpoint store: the run's own folder (a retry of this run resumes)."""
        return Path(self.state_dir) / "checkpoints"

    def for_rank(self, rank: int) -> RunState:
        """Where a distributed step's rank other than 0 keeps its state: one fragment per node."""
        return self if rank == 0 else RunState(Path(self.state_dir) / "ranks" / str(rank), self.run_id)

    def _read(self, path: Path) -> dict[str, Any] | None:
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("run_id", self.run_id) != self.run_id:
            return None
        return data

    def read_fragment(self, node: str) -> Fragment | None:
        data = self._read(self.fragment_path(node))
        if data is None:
            return None
        try:
            return Fragment.from_dict(data, run_id=self.run_id, node=node)
        except (TypeError, ValueError, AttributeError):
            log.warning("ignoring an unreadable receipt fragment for %s in %s", node, self.state_dir)
            return None

    def fragments(self, nodes: Iterable[str]) -> dict[str, Fragment]:
        return {n: f for n in nodes if (f := self.read_fragment(n)) is not None}

    def write_fragment(self, fragment: Fragment) -> Path:
        path = self.fragment_path(fragment.node)
        write_json_atomic(path, fragment.to_dict(), indent=1)
        return path

    def write_marker(self, node: str, failure: Failure, kind: StopMarker = StopMarker.FATAL) -> Path:
        path = self.marker_path(node, kind)
        write_json_atomic(path, {"node": node, "run_id": self.run_id, "failure": failure.to_dict()}, indent=1)
        return path

    def read_marker(self, node: str, kind: StopMarker = StopMarker.FATAL) -> Marker | None:
        data = self._read(self.marker_path(node, kind))
        if data is None:
            return None
        try:
            return Marker(kind, node, self.run_id, Failure.from_dict(data.get("failure")))  # type: ignore[arg-type]
        except (PolicyError, TypeError, ValueError):
            return None

    def write_receipt(self, receipt: dict[str, Any]) -> Path:
        write_json_atomic(self.receipt_path, receipt, indent=2)
        return self.receipt_path


def write_json_atomic(path: Path, data: Any, *, indent: int = 1) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=indent, default=str))
    os.replace(tmp, path)


# -- outcomes ----------------------------------------------------------------------------------
@dataclass
class StepOutcome:
    status: Status
    attempts: int = 0
    cached: bool = False
    failure: dict[str, Any] | None = None  # Failure.to_dict() of the failure that ended the step
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        self.cached = self.cached or self.status is Status.CACHED


@dataclass(frozen=True)
class Seen:
    """What a backend saw of a node it reached; everything else comes from the fragments.

    ``status`` is SUCCEEDED, FAILED or CACHED as the orchestrator saw it. ``error`` is the
    StepFailed the backend caught, when it ran the node in-process. ``shim_ran`` is False
    when the backend knows the task ended without the shim writing its fragment (the shim
    refused a node that a stop marker stops). ``detail`` explains a failure that the shim did
    not record; ``duration_s`` is the backend's wall time, used when there is no fragment.
    """

    status: Status
    error: StepFailed | None = None
    shim_ran: bool = True
    detail: str | None = None
    duration_s: float | None = None


@dataclass
class RunOutcome:
    status: Status  # SUCCEEDED | FAILED
    steps: dict[str, StepOutcome]
    error: RunFailed | None = None
    fragments: dict[str, Fragment] = field(default_factory=dict)

    @property
    def statuses(self) -> dict[str, Status]:
        return {k: v.status for k, v in self.steps.items()}


def gate_closed(spec: PipelineSpec, node: str, gates: Mapping[str, bool]) -> bool:
    """True when an il.when block enclosing ``node`` had a condition that came out false."""
    return any(gates.get(g.id) is False for g in spec.gate_chain(spec.node(node).gate))


def settle(
    spec: PipelineSpec,
    state: RunState,
    seen: Mapping[str, Seen] | None,
    *,
    gates: Mapping[str, bool] | None = None,
    failed: str | None = None,
) -> RunOutcome:
    """Each step's outcome, the run's status and its first failure; one rule for every backend.

    ``seen``: the nodes the backend reached, with what it saw; None when it observed nothing
    (a KFP exit task reads only fragments). ``gates``: each il.when condition the backend
    could evaluate (its condition node produced a value), by gate id. ``failed``: why the
    run failed outside any step, if it did.

    A node the backend reached has the status it saw, with attempts and failure from its
    fragment. A node it did not reach is SKIPPED when an enclosing gate's condition was
    false, else NOT_RUN (an earlier failure stopped the run first).
    """
    gates = gates or {}
    fragments = state.fragments(n.name for n in spec.nodes)
    steps: dict[str, StepOutcome] = {}
    error: RunFailed | None = None
    for node in spec.nodes:
        frag = fragments.get(node.name)
        saw = (seen or {}).get(node.name)
        if saw is None and seen is None and frag is not None:
            saw = Seen(frag.status)
        if saw is None:
            closed = gate_closed(spec, node.name, gates)
            steps[node.name] = StepOutcome(Status.SKIPPED if closed else Status.NOT_RUN)
            continue
        ran = frag is not None and saw.status is not Status.CACHED
        attempts = len(frag.attempts) if ran and frag else 0
        duration = frag.duration_s if ran and frag else round(saw.duration_s or 0.0, 6)
        if saw.status is not Status.FAILED:
            steps[node.name] = StepOutcome(saw.status, attempts=attempts, duration_s=duration)
            continue
        failure = _failure_of(state, node.name, frag, saw)
        steps[node.name] = StepOutcome(Status.FAILED, attempts=attempts, failure=failure.to_dict(), duration_s=duration)
        if error is None:
            error = saw.error or StepFailed(
                node.name, failure.kind, failure.reason, hint=failure.hint, attempts=max(attempts, 1),
                pipeline=spec.name, failure=failure, attempt_log=frag.attempts if frag else (),
            )
            if error.pipeline is None:
                error.pipeline = spec.name
    if error is None and failed is not None:
        error = RunFailed(failed, pipeline=spec.name)
    status = Status.FAILED if error is not None else Status.SUCCEEDED
    return RunOutcome(status, steps, error, fragments)


def _failure_of(state: RunState, node: str, frag: Fragment | None, saw: Seen) -> Failure:
    """Why a node the backend saw fail failed: the error in hand, the marker, or the fragment."""
    if saw.error is not None:
        if saw.error.failure is not None:
            return saw.error.failure
        return Failure(saw.error.kind, saw.error.reason, saw.error.hint)
    marker = state.read_marker(node) if not saw.shim_ran else None
    if marker is not None:  # the shim refused at once: this node failed FATAL earlier in this run
        return marker.refusal()
    # The fragment's failures explain this one only when the shim itself ended the step failed.
    recorded = frag.failures() if frag is not None and saw.shim_ran and frag.status is Status.FAILED else []
    if recorded:
        return recorded[-1]
    return Failure(FailureKind.FATAL, saw.detail or "the task failed before the shim ran (see the backend's log above)")
