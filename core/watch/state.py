"""What ``interlock watch`` remembers between evaluations and across restarts.

One JSON file per pipeline, ``<workdir>/watch/<pipeline>.json``: per trigger the last
evaluation, the data versions seen, the drift episodes checked (the newest data's URI and
version, and whether it had drifted), and every run started with its cause. It is replaced
atomically (a temporary file renamed over it) while an ``flock`` on ``<pipeline>.lock`` is
held, so two watchers of one pipeline never both start the run of one data version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from interlock.core.base.errors import WatchError
from interlock.core.run.files import write_json_atomic

STATE_VERSION = 1


@dataclass
class TriggerState:
    last: datetime | None = None  # the last evaluation (time triggers: the fire times up to it are done)
    seen: dict[str, str] | None = None  # data: uri -> version; None until the first listing
    checked: dict[str, bool] = field(default_factory=dict)  # drift: "uri@version" -> drifted

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"last": self.last.isoformat() if self.last else None, "checked": dict(self.checked)}
        if self.seen is not None:
            out["seen"] = dict(self.seen)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TriggerState:
        last = d.get("last")
        seen = d.get("seen")
        checked = d.get("checked", {})
        if last is not None and not isinstance(last, str):
            raise TypeError(f"last is {last!r}, not an ISO time")
        if seen is not None and not (isinstance(seen, dict) and all(isinstance(v, str) for v in seen.values())):
            raise TypeError("seen is not a map of URI to version")
        if not (isinstance(checked, dict) and all(isinstance(v, bool) for v in checked.values())):
            raise TypeError("checked is not a map of data version to true/false")
        return cls(datetime.fromisoformat(last) if last else None, dict(seen) if seen is not None else None, dict(checked))


@dataclass
class StartedRun:
    run_id: str
    trigger: str
    cause: dict[str, Any]  # Cause.to_json()
    started: str  # ISO time the watcher started it

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "trigger": self.trigger, "cause": self.cause, "started": self.started}


@dataclass
class WatchState:
    pipeline: str
    triggers: dict[str, TriggerState] = field(default_factory=dict)
    runs: list[StartedRun] = field(default_factory=list)

    def of(self, label: str) -> TriggerState:
        return self.triggers.setdefault(label, TriggerState())

    def runs_of(self, label: str) -> list[StartedRun]:
        return [r for r in self.runs if r.trigger == label]

    def to_json(self) -> dict[str, Any]:
        return {"state_version": STATE_VERSION, "pipeline": self.pipeline,
                "triggers": {k: v.to_json() for k, v in sorted(self.triggers.items())},
                "runs": [r.to_json() for r in self.runs]}

    @classmethod
    def from_json(cls, d: Any, pipeline: str) -> WatchState:
        if not isinstance(d, dict) or d.get("state_version") != STATE_VERSION:
            raise TypeError(f"it is not a version-{STATE_VERSION} watch state")
        if d.get("pipeline") != pipeline:
            raise TypeError(f"it is the state of pipeline {d.get('pipeline')!r}, not {pipeline!r}")
        triggers = {str(k): TriggerState.from_json(v) for k, v in dict(d["triggers"]).items()}
        runs = [StartedRun(str(r["run_id"]), str(r["trigger"]), dict(r["cause"]), str(r["started"])) for r in d["runs"]]
        return cls(pipeline, triggers, runs)


def state_path(workdir: Path, pipeline: str) -> Path:
    return Path(workdir) / "watch" / f"{pipeline}.json"


def read_state(path: Path, pipeline: str) -> WatchState:
    """The state at ``path`` (a fresh one when there is no file); a damaged file is a
    ``WatchError`` naming it, never taken for an empty state (that would start runs again)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return WatchState(pipeline)
    except OSError as exc:
        raise WatchError(f"cannot read the watch state {path}: {exc}") from exc
    try:
        return WatchState.from_json(json.loads(text), pipeline)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        what = f"not JSON ({exc})" if isinstance(exc, json.JSONDecodeError) else f"damaged: {exc}"
        err = WatchError(
            f"the watch state {path} is {what}",
            hint="interlock writes it atomically, so it was edited or copied in part; move it away to start "
            "afresh (the data already there then counts as seen, unless a trigger has catch_up=True)",
        )
        err.retryable = False  # waiting does not mend it: the watcher stops
        raise err from exc


def write_state(path: Path, state: WatchState) -> None:
    write_json_atomic(path, state.to_json(), indent=1)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold ``<state>.lock`` (blocking: another watcher's evaluation takes a moment)."""
    import fcntl

    lock = path.with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
