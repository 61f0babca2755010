"""A run's state: the one place that knows where it lives, how it is named and what it means.

Every backend runs steps through the runtime shim, and the shim leaves its state in one
directory per run:

    <state_dir>/receipts/<node>.json       a Fragment per node: status, attempts, snapshots
    <state_dir>/markers/<node>.<kind>.json  a Marker: "stop, do not run this node again"
    <state_dir>/receipt.json               the run's receipt, merged from the fragments

A child process (a kfp subprocess, a container, a torch worker) finds the run through the
environment (``env.py``): ``RunContext.to_env()/from_env()`` is the only way across. The
records themselves are ``records.py``, their atomic writes ``files.py``. At the end of a run
``settle`` (``record/outcomes.py``)
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PolicyError
from interlock.core.base.status import FailureKind
from interlock.core.run.env import RunEnv
from interlock.core.run.files import (
    append_record,
    create_text,
    json_by_lines,
    last_object,
    write_json_atomic,
    write_text_atomic,
)
from interlock.core.run.records import ALL_KINDS, Fragment, StopMarker

if TYPE_CHECKING:
    from interlock.core.failure.record import Failure
    from interlock.core.run.marker import Marker

log = logging.getLogger("interlock.runstate")


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
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, run_id_env: str | None = None, **overrides: Any
    ) -> RunContext:
        seen = RunEnv.read(env, run_id_env=run_id_env)
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

            return Marker(kind, node, self.run_id, Failure.from_dict(data.get("failure")))
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

    def secret_digests(self) -> frozenset[str]:
        """Digests of the values this run's steps returned that hold a secret (see
        ``write_secret_digests``): a later step's input with one of them is a secret too."""
        folder = f"{os.fspath(self.state_dir) or '.'}{os.sep}secrets"
        try:
            names = os.listdir(folder)
        except OSError:
            return frozenset()
        found: set[str] = set()
        for name in names:
            data = self._read(f"{folder}{os.sep}{name}")
            if data is not None and isinstance(data.get("digests"), list):
                found.update(str(d) for d in data["digests"])
        return frozenset(found)

    def write_secret_digests(self, node: str, digests: Iterable[str]) -> None:
        """Note that ``node`` returned secrets, by digest only (``secret_digest``): the value
        itself is never written to the run's state, and the next step's shim can still tell
        that an input it was handed is one."""
        write_json_atomic(Path(self.state_dir) / "secrets" / f"{node}.json",
                          {"run_id": self.run_id, "node": node, "digests": sorted(set(digests))}, indent=None)

    def secret_digest(self, value: str) -> str:
        import hashlib

        return hashlib.sha256(f"{self.run_id}\0{value}".encode()).hexdigest()

    @property
    def params_path(self) -> Path:
        """The run's parameters in JSON form, for a resume (core/record/resume.py writes them)."""
        return Path(self.state_dir) / "params.json"

    def read_params(self) -> tuple[dict[str, Any], list[str]] | None:
        """(recorded values, names withheld) of the run's last attempt; None if not recorded."""
        data = self._read(self.params_path)
        if data is None:
            return None
        withheld = data.get("withheld", [])
        if not isinstance(data.get("params"), dict) or not isinstance(withheld, list):
            from interlock.core.base.errors import RecordError

            raise RecordError(
                f"{self.params_path} is not the parameters interlock recorded for run {self.run_id}: "
                "'params' must be an object and 'withheld' a list",
                hint="pass every parameter again (-p NAME=VALUE), or start a new run without --resume",
            )
        return dict(data["params"]), [str(n) for n in withheld]

    @property
    def cause_path(self) -> Path:
        """Why the run started (``il.run(triggered_by=...)``: a trigger's Cause as JSON)."""
        return Path(self.state_dir) / "triggered_by.json"

    def write_cause(self, cause: dict[str, Any]) -> None:
        write_json_atomic(self.cause_path, cause, indent=1)

    def read_cause(self) -> dict[str, Any] | None:
        return self._read(self.cause_path)

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




def run_in_progress(run_dir: Path) -> bool:
    """Whether a process holds the run folder's lock now (``lock_run``): the run is running."""
    import fcntl

    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
