"""A run's state: the one place that knows where it lives, how it is named and what it means.

Every backend runs steps through the runtime shim, and the shim leaves its state in one
directory per run:

    <state_dir>/receipts/<node>.json       a Fragment per node: status, attempts, snapshots
    <state_dir>/markers/<node>.<kind>.json  a Marker: "stop, do not run this node again"
    <state_dir>/receipt.json               the run's receipt, merged from the fragments

A child process (a kfp subprocess, a container, a torch worker) finds the run through the
environment: ``RunEnv`` is the only code that spells those variable names, and
``RunContext.to_env()/from_env()`` the only way across. At the end of a run ``settle`` (outcomes.py)
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
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PolicyError
from interlock.core.base.status import FailureKind, Status

if TYPE_CHECKING:
    from interlock.core.failure.record import Failure
    from interlock.core.run.marker import Marker

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
    # Durable run state for backends that retry in a fresh pod (a KFP pipeline root, s3://...):
    # each node's fragment and stop markers are mirrored there (statestore.DurableState).
    STATE_STORE = "INTERLOCK_STATE_STORE"
    # The run id as the orchestrator knows it, when INTERLOCK_RUN_ID cannot be set at compile
    # time: the kfp adapter maps the pod's `pipeline/runid` label to it (downward API).
    ORCHESTRATOR_RUN_ID = "KFP_RUN_ID"
    # "1" in the task templates the flyte and kfp compilers emit for a cluster: there, and only
    # there, SIGTERM to an interruptible step is a spot reclaim (checkpoint, PREEMPTED, retry).
    # Anywhere else SIGTERM is someone stopping the run (docs/stopping-and-timeouts.md).
    ON_CLUSTER = "INTERLOCK_ON_CLUSTER"
    # Set by a parent that watches a run (kfp-local): a step's output lines are relayed to it
    # as tagged lines on the task's stdout (core/run/live.py); "relay-verbose" keeps foreign logs.
    LIVE = "INTERLOCK_LIVE"


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
    state_store: str | None = None
    on_cluster: bool | None = None

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
            state_store=env.get(EnvName.STATE_STORE) or None,
            on_cluster=env[EnvName.ON_CLUSTER] == "1" if env.get(EnvName.ON_CLUSTER) else None,
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
            EnvName.STATE_STORE: self.state_store,
            EnvName.ON_CLUSTER: ("1" if self.on_cluster else "0") if self.on_cluster is not None else None,
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
    """A run's folder in a work directory or a volume shared by runs.

    The id becomes one path component, never more: ``../x`` or ``a/b`` would put a run's
    state (and whatever a reused id deletes) outside ``root``. User-given ids are checked
    against the full naming rule before this (backends.check_run_id); ids an orchestrator
    assigns (KFP's run UUID) only need to be one safe component.
    """
    text = str(run_id)
    if not text or text in (".", "..") or any(c in text for c in ("/", "\\", "\0")):
        from interlock.core.base.errors import RunIdError

        raise RunIdError(f"run id {run_id!r} is not a single path component; it cannot name a run folder")
    return Path(root) / "runs" / text


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
    state_store: str | None = None  # where node state outlives the pod (a store URI); None: state_dir is enough
    # Running in a cluster's task (EnvName.ON_CLUSTER): SIGTERM to an interruptible step is a
    # preemption. False: SIGTERM and SIGINT stop the run.
    on_cluster: bool = False

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
            state_store=self.state_store,
            on_cluster=self.on_cluster or None,
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
            "state_store": seen.state_store,
            "on_cluster": bool(seen.on_cluster),
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
    status: Status  # SUCCEEDED | FAILED | STOPPED
    failure: dict[str, Any] | None = None  # Failure.to_dict(): receipts keep the JSON form
    decision: str | None = None
    delay_s: float = 0.0
    batch_size_factor: float = 1.0

    def __post_init__(self) -> None:
        if type(self.status) is not Status:  # the shim passes a Status (Status() of one is a lookup)
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
        from interlock.core.failure.record import Failure

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
    status: Status  # SUCCEEDED | FAILED | CACHED | STOPPED
    fingerprint: str | None = None
    image: str | None = None
    started: float = 0.0
    ended: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    distributed: dict[str, Any] | None = None
    device: dict[str, Any] | None = None  # what the step ran on (core/run/devices.py): GPU billing

    def __post_init__(self) -> None:
        if type(self.status) is not Status:  # the shim passes a Status (Status() of one is a lookup)
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
    """Why a node must not run again in this run (one file per node and kind).

    The shim writes one whenever it decides "do not retry": a backend that retries every
    failure (KFP's ``set_retry``) or a retry in a fresh pod must end in seconds, not rerun.
    """

    FATAL = "fatal"  # it failed FATAL: a backend retry cannot help
    EXHAUSTED = "exhausted"  # its retry budget for that failure kind is spent
    # The run was stopped (SIGTERM, Ctrl-C) while it ran: a backend retry must not restart it
    # behind the user's back; resuming the run clears it.
    STOPPED = "stopped"


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
        return Path(self.fragment_file(node))

    def fragment_file(self, node: str) -> str:
        """``fragment_path`` as a str, by format: the shim reads and writes a node's fragment
        three times per step, and a Path (or os.path.join's checks) cost more than the file's
        own read."""
        return f"{os.fspath(self.state_dir) or '.'}{os.sep}receipts{os.sep}{node}.json"

    def marker_path(self, node: str, kind: StopMarker = StopMarker.FATAL) -> Path:
        return Path(self.state_dir) / "markers" / f"{node}.{kind.value}.json"

    @property
    def receipt_path(self) -> Path:
        return Path(self.state_dir) / "receipt.json"

    @property
    def checkpoints_dir(self) -> Path:
        """The default checkpoint store: the run's own folder (a retry of this run resumes)."""
        return Path(self.state_dir) / "checkpoints"

    def metrics_path(self, node: str) -> Path:
        """Points a step logged (``ctx.log_metric``/``ctx.progress``), one JSON line each."""
        from interlock.core.run.metrics import metrics_path

        return metrics_path(self.state_dir, node)

    def for_rank(self, rank: int) -> RunState:
        """Where a distributed step's rank other than 0 keeps its state: one fragment per node."""
        return self if rank == 0 else RunState(Path(self.state_dir) / "ranks" / str(rank), self.run_id)

    def _read(self, path: str | Path, *, last: bool = False) -> dict[str, Any] | None:
        """The JSON object at ``path`` (``last``: the file's last whole record, see
        ``last_object``), if it is this run's; None if missing, unreadable or another run's."""
        # Opened without a stat first (settle reads every node's fragment; a missing file is
        # an OSError like any unreadable one) and os-level (pathlib's read_text decodes twice).
        try:
            with open(path, "rb") as f:
                raw = f.read()
            data = last_object(raw) if last else json.loads(raw)
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("run_id", self.run_id) != self.run_id:
            return None
        return data

    def read_fragment(self, node: str) -> Fragment | None:
        data = self._read(self.fragment_file(node), last=True)
        if data is None:
            return None
        try:
            return Fragment.from_dict(data, run_id=self.run_id, node=node)
        except (TypeError, ValueError, AttributeError):
            log.warning("ignoring an unreadable receipt fragment for %s in %s", node, self.state_dir)
            return None

    def fragments(self, nodes: Iterable[str]) -> dict[str, Fragment]:
        # One listing, then only the files that exist: a cached rerun has no fragments, and a
        # stat per node was most of reading none.
        try:
            present = set(os.listdir(Path(self.state_dir) / "receipts"))
        except OSError:
            return {}
        return {n: f for n in nodes if f"{n}.json" in present and (f := self.read_fragment(n)) is not None}

    def write_fragment(self, fragment: Fragment, *, new: bool = False) -> str:
        """``new``: the caller found no fragment for the node; the file is created with this
        record if still none is there (``create_text``); else (or not ``new``) the record is
        appended (``append_record``): a fragment file holds one JSON record per line, and the
        last whole one is the fragment. Returns the file's path (``fragment_path``, as a str)."""
        path = self.fragment_file(fragment.node)
        # Compact: json's C encoder only writes without indent; two writes per step (one
        # before the call, one after) made the pure-Python encoder a fifth of the shim's cost.
        # One line: json.dumps escapes every newline inside a string.
        text = json.dumps(fragment.to_dict(), sort_keys=True, default=str)
        if not (new and create_text(path, text + "\n")):
            append_record(path, text)
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
            from interlock.core.failure.record import Failure
            from interlock.core.run.marker import Marker

            return Marker(kind, node, self.run_id, Failure.from_dict(data.get("failure")))  # type: ignore[arg-type]
        except (PolicyError, TypeError, ValueError):
            return None

    def stop_marker(self, node: str) -> Marker | None:
        """The marker that stops ``node`` in this run, whatever its kind (FATAL first)."""
        try:  # one listing: the shim asks before every step, and most runs have no markers
            present = set(os.listdir(f"{os.fspath(self.state_dir) or '.'}{os.sep}markers"))
        except OSError:
            return None
        for kind in StopMarker:
            if f"{node}.{kind.value}.json" not in present:
                continue
            marker = self.read_marker(node, kind)
            if marker is not None:
                return marker
        return None

    def node_files(self, node: str) -> list[Path]:
        """The files that hold ``node``'s state in this run (its fragment and markers)."""
        return [self.fragment_path(node), *(self.marker_path(node, k) for k in StopMarker)]

    def markers(self) -> list[Marker]:
        """Every stop marker this run left, whatever its node and kind."""
        found: list[Marker] = []
        folder = Path(self.state_dir) / "markers"
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            node, _, kind = path.name[: -len(".json")].rpartition(".")
            try:
                marker = self.read_marker(node, StopMarker(kind))
            except ValueError:
                continue  # a kind this version does not know: not ours to interpret
            if marker is not None:
                found.append(marker)
        return found

    def clear_markers(self) -> list[Marker]:
        """Remove this run's stop markers (resume): the nodes they stopped may run again."""
        cleared = self.markers()
        for m in cleared:
            self.marker_path(m.node, m.kind).unlink(missing_ok=True)
        return cleared

    @property
    def params_path(self) -> Path:
        """The run's parameters in JSON form, for a resume (core/record/resume.py writes them)."""
        return Path(self.state_dir) / "params.json"

    def read_params(self) -> tuple[dict[str, Any], list[str]] | None:
        """(recorded values, names withheld) of the run's last attempt; None if not recorded."""
        data = self._read(self.params_path)
        if data is None or not isinstance(data.get("params"), dict):
            return None
        return dict(data["params"]), [str(n) for n in data.get("withheld", [])]

    @property
    def resumes_path(self) -> Path:
        return Path(self.state_dir) / "resumes.json"

    def resumes(self) -> list[dict[str, Any]]:
        data = self._read(self.resumes_path)
        return list(data.get("resumes", [])) if data else []

    def resume(self, *, at: float | None = None) -> dict[str, Any]:
        """Start another attempt of this run: clear its stop markers and open a new retry budget.

        Checkpoints (keyed by run id and node) and fragments stay, so a step that failed
        resumes from its latest committed checkpoint and the receipt keeps every attempt.
        The attempts recorded so far are noted per node: a retry budget replays only the
        failures after the last resume (``failures_since_resume``).
        """
        folder = Path(self.state_dir) / "receipts"
        nodes = [p.stem for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
        frags = self.fragments(nodes)
        entry = {
            "at": time.time() if at is None else at,
            "cleared": [{"node": m.node, "kind": m.kind.value, "failure": m.failure.to_dict()} for m in self.clear_markers()],
            "attempts_before": {n: len(f.attempts) for n, f in frags.items()},
        }
        write_json_atomic(self.resumes_path, {"run_id": self.run_id, "resumes": [*self.resumes(), entry]}, indent=1)
        return entry

    def failures_since_resume(self, node: str) -> list[Failure]:
        """The node's recorded failures since the run was last resumed (what a retry budget replays)."""
        frag = self.read_fragment(node)
        if frag is None:
            return []
        resumes = self.resumes()
        skip = int(resumes[-1].get("attempts_before", {}).get(node, 0)) if resumes else 0
        return [f for f in (a.failure_record() for a in frag.attempts[skip:]) if f is not None]

    def write_receipt(self, receipt: dict[str, Any]) -> Path:
        write_text_atomic(self.receipt_path, json_by_lines(receipt))
        return self.receipt_path


LOCK_FILE = ".lock"


@contextmanager
def lock_run(run_dir: Path, run_id: str) -> Iterator[Path]:
    """Hold a run's folder for the duration of a run; a second holder fails at once.

    An advisory ``flock`` on ``<run_dir>/.lock``, which holds our pid for the error message.
    The kernel drops the lock when its holder dies, so a lock left by a killed process is
    taken over without any staleness guess (and a recycled pid cannot fake a live holder).
    """
    import fcntl  # POSIX; interlock's backends run on Linux and macOS

    from interlock.core.base.errors import RunInProgress

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise RunInProgress(
                f"run {run_id} is in progress (pid {holder}) in {run_dir.parent.parent}",
                hint="wait for it to finish, or pick another --run-id",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # the lock file stays (unlinking would race a waiting taker)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 1) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    write_text_atomic(path, json.dumps(data, sort_keys=True, indent=indent, default=str))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write a temporary file next to ``path``, then rename it over ``path``: a reader, or a
    process killed at any point, sees the old file or the new one, never half of one. No
    fsync: the state must survive the process (a kill, an eviction), not the machine."""
    where = os.fspath(path)
    head, name = os.path.split(where)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    data = text.encode()
    try:  # the folder exists but for a file's first write: make it only then
        _write_bytes(tmp, data, os.O_TRUNC)
    except FileNotFoundError:
        os.makedirs(head or ".", exist_ok=True)
        _write_bytes(tmp, data, os.O_TRUNC)
    os.replace(tmp, where)


def create_text(path: str | Path, text: str) -> bool:
    """Write ``path`` only if no file is there (O_EXCL); False if one is. For a file's first
    write: a rename has nothing to replace, so it buys nothing. A reader, or a process killed
    mid-write, may see the file empty or cut short: readers take an unreadable file for an
    absent one (``RunState._read``), which is what it was a moment before, and the next write
    (``append_record``) starts a line of its own after it. Half a file is never taken for a record."""
    where = os.fspath(path)
    data = text.encode()
    try:
        _write_bytes(where, data, os.O_EXCL)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
        try:
            _write_bytes(where, data, os.O_EXCL)
        except FileExistsError:
            return False
    return True


def append_record(path: str | Path, text: str) -> None:
    """Append ``text`` (one line of JSON) to the record file at ``path``, creating it if needed.

    Appended, not swapped in: a step writes its fragment twice (before the call: what a
    killed attempt leaves; after: how it ended), and a new file for the second write, then
    a rename, cost more than the step's shim on some file systems (an inode made and freed
    per step). Atomic for readers all the same: ``last_object`` takes the last line that
    ends in a newline, so a record still being written, or cut short by a kill, is not read
    and the one before it still is. The record starts with a newline of its own, so one cut
    short before it can never run into it."""
    where = os.fspath(path)
    data = f"\n{text}\n".encode()
    try:
        _write_bytes(where, data, os.O_APPEND)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
        _write_bytes(where, data, os.O_APPEND)


def last_object(data: bytes) -> dict[str, Any] | None:
    """The last whole record of a record file (``append_record``): its last line that ends
    in a newline and holds a JSON object. A line that does not parse is passed over for the
    one before it: a record torn where a file system wrote its end before a page ahead of it
    (a network volume, a node lost mid-write) counts as not written, as a record cut short
    does. A file without any newline is one record, as written before records were appended
    (or a first record cut short, which does not parse: None)."""
    end = data.rfind(b"\n")
    lines = [data] if end < 0 else data[:end].split(b"\n")
    for line in reversed(lines):
        if not line:
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _write_bytes(path: str, data: bytes, mode: int) -> None:
    # os-level: pathlib's write_text and its TextIOWrapper cost as much as the write itself
    # (two fragment writes per step).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def json_by_lines(data: Mapping[str, Any]) -> str:
    """A JSON object with one key per line and one item of a list per line: readable, and
    written by json's C encoder (``indent`` makes json use its pure-Python one, about a
    tenth of a millisecond per step of a receipt)."""
    def enc(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    def member(value: Any) -> str:
        if isinstance(value, list) and value:
            return "[\n" + ",\n".join(f"  {enc(v)}" for v in value) + "\n ]"
        return enc(value)

    return "{\n" + ",\n".join(f" {enc(str(k))}: {member(data[k])}" for k in sorted(data)) + "\n}\n"
