"""``il.StepContext``: what the runtime hands a step that asks for it (by annotation).

It carries the run's identity, the step's checkpointer (bound to a key that is stable
across retries of this run), snapshot recording for receipts, and the batch-size
adjustments of an OOM remediation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from interlock.core.run.usage import AttemptUsage, timed_iter, timed_wait

_T = TypeVar("_T")

if TYPE_CHECKING:
    from interlock.core.checkpoint.checkpointer import Checkpointer
    from interlock.core.run.metrics import MetricLog


@dataclass
class StepContext:
    pipeline: str
    run_id: str
    node: str
    attempt: int = 1
    checkpoint: Checkpointer | None = None
    backend: str = "direct"
    checkpoint_every_s: float | None = None
    # OOM remediation: multiply the batch size by this and gradient accumulation by its inverse.
    batch_size_factor: float = 1.0
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    _last_save: float = field(default_factory=time.monotonic)
    metrics: MetricLog | None = None  # the runtime points this at the run's metrics file
    # The run's state directory: with the run id, what tells this run from another of the
    # same id in another work directory (a tracker's run is found by both).
    state_dir: str | None = None
    usage: AttemptUsage = field(default_factory=AttemptUsage)  # this attempt's; the shim renews it

    def waiting_for_data(self) -> AbstractContextManager[None]:
        """Time the block as waiting for data (a fetch, a read of the next shard); the receipt,
        the report and the metrics show it beside the step's GPU time::

            with ctx.waiting_for_data():
                batch = next(loader_iter)
        """
        return timed_wait(self.usage)

    def timed_data(self, items: Iterable[_T]) -> Iterator[_T]:
        """``items`` (a DataLoader, any iterable), counting the time each next batch takes to
        arrive as data wait: ``for batch in ctx.timed_data(loader): ...``."""
        return timed_iter(self.usage, items)

    def log_metric(self, name: str, value: float, step: int | None = None) -> None:
        """Record one point of a metric (``step`` = epoch or iteration, for curves). It lands
        in the run's state (``metrics/<step>.jsonl``), the run report and the trackers."""
        self._metric_log().log(name, value, step=step)

    def progress(self, done: float, of: float | None = None, *, unit: str = "step") -> None:
        """Say how far the step is (``ctx.progress(epoch, of=epochs)``); live progress
        shows it in the step's heartbeat."""
        from interlock.core.run.metrics import PROGRESS

        self._metric_log().log(unit, done, kind=PROGRESS, of=of)

    def _metric_log(self) -> MetricLog:
        if self.metrics is None:
            from interlock.core.run.metrics import MetricLog

            self.metrics = MetricLog(self.node, attempt=self.attempt)
        self.metrics.attempt = self.attempt
        return self.metrics

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"interlock.step.{self.node}")

    def record_snapshot(self, snapshot_id: str, **details: Any) -> None:
        """Declare the frozen data snapshot this step read; it lands in the run's receipt."""
        entry = {"id": str(snapshot_id), **{k: v for k, v in details.items() if v is not None}}
        if entry not in self.snapshots:
            self.snapshots.append(entry)

    def record(self, **facts: Any) -> None:
        """Attach JSON-able facts to this step's receipt entry (e.g. precision="bf16")."""
        self.facts.update(facts)

    def report_device(self, device: Any, count: int | None = None) -> None:
        """Say what this step computes on (``"cuda"``, ``"cpu"``, a ``torch.device``; ``count``
        GPUs, default 1 for a GPU). The receipt bills GPU-seconds from it, not from the request."""
        from interlock.core.run.devices import DEVICE_FACT, device_record

        self.facts[DEVICE_FACT] = device_record(device, count)

    def batch_size(self, requested: int) -> int:
        """The batch size to use on this attempt (halved per OOM remediation, never below 1)."""
        return max(1, int(requested * self.batch_size_factor))

    def grad_accumulation(self, requested: int = 1) -> int:
        """Gradient accumulation steps that keep the effective batch after an OOM remediation."""
        return max(1, round(requested / self.batch_size_factor))

    def checkpoint_due(self) -> bool:
        """True once ``CheckpointPolicy.every`` has passed since the last save (or the start)."""
        if self.checkpoint_every_s is None:
            return False
        return time.monotonic() - self._last_save >= self.checkpoint_every_s

    def mark_checkpointed(self) -> None:
        self._last_save = time.monotonic()

    @property
    def preemption_requested(self) -> bool:
        """True once this process got SIGTERM as a spot reclaim (an interruptible step on a
        cluster). A rank that does not save itself (another rank wrote the group's
        checkpoint) raises ``il.Preempted`` once that checkpoint is committed."""
        return bool(self.facts.get("_preemption_requested"))

    @classmethod
    def local(cls, node: str) -> StepContext:
        """A context for calling a step function directly (tests, notebooks)."""
        from interlock.core.base.scratch import make_temp_dir
        from interlock.core.checkpoint.checkpointer import Checkpointer
        from interlock.core.checkpoint.local import LocalCheckpointStore

        root = make_temp_dir("interlock-direct-")  # removed when the process exits
        return cls(
            pipeline="direct",
            run_id="direct",
            node=node,
            checkpoint=Checkpointer(LocalCheckpointStore(root), f"direct/{node}", keep=2),
        )
