"""The tracking seam: experiment trackers (MLflow...) that see every run of a pipeline.

A tracker is attached to a pipeline by name (``attach``; a tracking plugin's own
``track(pipeline, ...)`` does it, docs/mlflow.md) and ``il.run`` tells it when a
run starts and how it ended, in the process that started the run, whatever the backend:
steps that run in other processes (kfp-local) need no hook of their own, because what
they log lands in the run's state (``ctx.log_metric`` -> ``metrics/<node>.jsonl``, the
receipt) and the tracker reads it from there. A tracker that fails never fails the run:
one warning says what it could not record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec
    from interlock.core.record.outcomes import RunResult

__all__ = ["RunTracker", "TrackedRun", "attach", "attached", "detach", "tracked"]

log = logging.getLogger("interlock.trackers")


@dataclass(frozen=True)
class TrackedRun:
    """What a tracker knows about a run when it starts."""

    spec: PipelineSpec
    run_id: str
    backend: str
    workdir: Path
    state_dir: Path
    params: Mapping[str, Any]  # resolved, as the run records them (core.resume.record_params)
    started: float
    resumed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # trackers may keep notes here


@runtime_checkable
class RunTracker(Protocol):
    name: str

    def run_started(self, run: TrackedRun) -> None:
        """Before any step runs."""
        ...

    def run_finished(self, run: TrackedRun, result: RunResult | None, error: BaseException | None) -> None:
        """After the backend returned (``result``), or raised (``error``, result None)."""
        ...


_attached: dict[str, list[RunTracker]] = {}


def attach(pipeline: str, tracker: RunTracker) -> None:
    """Let ``tracker`` see every run of pipeline ``pipeline`` started in this process; a
    tracker of the same name replaces the earlier one (a module imported twice)."""
    trackers = [t for t in _attached.get(pipeline, []) if t.name != tracker.name]
    _attached[pipeline] = [*trackers, tracker]


def detach(pipeline: str, name: str | None = None) -> None:
    """Remove pipeline ``pipeline``'s tracker ``name`` (every tracker when None)."""
    if name is None:
        _attached.pop(pipeline, None)
    else:
        _attached[pipeline] = [t for t in _attached.get(pipeline, []) if t.name != name]


def attached(pipeline: str) -> list[RunTracker]:
    return list(_attached.get(pipeline, []))


class _Tracking:
    def __init__(self, run: TrackedRun, trackers: list[RunTracker]) -> None:
        self.run, self.trackers, self.result = run, trackers, None

    def finished(self, result: RunResult) -> None:
        self.result = result


def _safely(tracker: RunTracker, what: str, fn: Any, *args: Any) -> bool:
    try:
        fn(*args)
    except Exception as exc:  # a tracker never fails a training run
        log.warning("tracker %s could not record the run's %s: %s", tracker.name, what, exc)
        return False
    return True


@contextmanager
def tracked(run: TrackedRun) -> Iterator[_Tracking]:
    """Tell the pipeline's trackers that ``run`` starts, then how it ended (``.finished(result)``
    inside the block, or the exception that left it)."""
    trackers = attached(run.spec.name)
    state = _Tracking(run, [t for t in trackers if _safely(t, "start", t.run_started, run)])
    try:
        yield state
    except BaseException as exc:
        for t in state.trackers:
            _safely(t, "end", t.run_finished, run, None, exc)
        raise
    for t in state.trackers:
        _safely(t, "end", t.run_finished, run, state.result, None)
