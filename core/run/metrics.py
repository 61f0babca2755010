"""Metrics a step logs while it runs (``ctx.log_metric``) and progress it reports
(``ctx.progress``): one JSON line per point, appended to the run's state directory.

The file is the seam: the run report draws training curves from it, trackers (MLflow)
forward it, live progress shows the last point. Appending one short line per point keeps
a killed step's history readable up to its last flush; readers skip a torn last line.
Listeners let a tracker in the same process see each point as it is logged.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROGRESS = "progress"  # the kind of a ctx.progress point; metrics are kind "metric"


@dataclass(frozen=True)
class MetricPoint:
    node: str
    name: str
    value: float
    step: int | None = None  # the training step/epoch; None: logged once (a final figure)
    at: float = 0.0  # wall-clock seconds since the epoch
    attempt: int = 1
    rank: int = 0
    kind: str = "metric"  # "metric" or PROGRESS (value = done, of = total)
    of: float | None = None

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetricPoint:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


Listener = Callable[[MetricPoint], None]
_listeners: list[Listener] = []


def add_listener(fn: Listener) -> Callable[[], None]:
    """Call ``fn`` with every point logged in this process; returns a function that removes it."""
    _listeners.append(fn)
    return lambda: _listeners.remove(fn) if fn in _listeners else None


def metrics_path(state_dir: Path | str, node: str) -> Path:
    return Path(state_dir) / "metrics" / f"{node}.jsonl"


def checked_value(name: str, value: Any, node: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"step {node!r}: metric {name!r} must be a number, got {type(value).__name__}") from exc
    return number


class MetricLog:
    """Where one step's points go: a JSON-lines file (when the step runs inside a run) and
    the in-memory list (always, so a direct call or a test can read them back)."""

    def __init__(self, node: str, path: Path | None = None, *, attempt: int = 1, rank: int = 0):
        self.node, self.path, self.attempt, self.rank = node, path, attempt, rank
        self.points: list[MetricPoint] = []

    def log(self, name: str, value: Any, *, step: int | None = None, kind: str = "metric",
            of: float | None = None) -> MetricPoint:
        if not isinstance(name, str) or not name:
            raise ValueError(f"step {self.node!r}: a metric needs a non-empty name, got {name!r}")
        number = checked_value(name, value, self.node)
        if not math.isfinite(number) and kind == PROGRESS:
            raise ValueError(f"step {self.node!r}: progress must be finite, got {value!r}")
        point = MetricPoint(self.node, name, number, None if step is None else int(step), time.time(),
                            self.attempt, self.rank, kind, None if of is None else float(of))
        self.points.append(point)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(point.to_json() + "\n")
        for fn in list(_listeners):
            fn(point)
        return point


def read_points(state_dir: Path | str, node: str | None = None) -> Iterator[MetricPoint]:
    """Every point recorded under ``state_dir`` (one node, or all), in file order; a torn
    last line (a killed writer) is skipped."""
    folder = Path(state_dir) / "metrics"
    files = [metrics_path(state_dir, node)] if node else sorted(folder.glob("*.jsonl"))
    for path in files:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                yield MetricPoint.from_dict(json.loads(line))
            except (ValueError, TypeError):
                continue
