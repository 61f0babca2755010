"""The GPU efficiency ratio of a step and of a run, and where the rest of the GPU time went.

    ratio = GPU-busy seconds / (wall seconds x GPUs)

for a step, and for a run the same sums over its GPU steps (each step holds its GPUs for
its own wall time, so a run's GPU wall time is the sum of wall x GPUs of its GPU steps;
for a pipeline whose steps all hold the same ``gpu_count`` this is
``total_step_gpu_seconds / (total_wall_seconds * gpu_count)``). Above 85% is well
optimized; below 70% calls for a look at data loading, collective synchronization or
checkpoint writes. The rest of the billed GPU time is split into data wait, checkpoint
writes and idle (what neither explains: synchronization, a slow host, a launch).

GPU-busy seconds come from NVML samples taken while each attempt ran
(core/run/usage.py, ``source: nvml``). Where no sample was taken (no NVML in the image,
a step that said ``ctx.report_device("cuda")`` on a host without one) the busy time is
estimated as billed time less data wait and checkpoint time (``source: estimated``):
that figure can only show the stalls interlock measured, never idle time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GOOD = 0.85
INVESTIGATE = 0.70


def verdict(ratio: float) -> str:
    """"good" above 85%, "investigate" below 70%, "fair" between."""
    return "good" if ratio > GOOD else "investigate" if ratio < INVESTIGATE else "fair"


@dataclass(frozen=True)
class GpuTime:
    """GPU-seconds of a step (or a run): billed, busy, and the stalls measured."""

    billed: float = 0.0
    busy: float = 0.0
    data_wait: float = 0.0
    checkpoint: float = 0.0
    source: str = "estimated"  # "nvml" when every attempt was sampled

    @property
    def idle(self) -> float:
        return max(0.0, self.billed - self.busy - self.data_wait - self.checkpoint)

    @property
    def ratio(self) -> float | None:
        return min(1.0, self.busy / self.billed) if self.billed > 0 else None

    def __add__(self, other: GpuTime) -> GpuTime:
        source = "nvml" if self.source == other.source == "nvml" else "estimated"
        return GpuTime(self.billed + other.billed, self.busy + other.busy, self.data_wait + other.data_wait,
                       self.checkpoint + other.checkpoint, source)

    def to_json(self) -> dict[str, Any] | None:
        """The receipt's ``gpu_efficiency``: None where no GPU time was billed."""
        ratio = self.ratio
        if ratio is None:
            return None
        share = {k: round(min(1.0, v / self.billed), 4) for k, v in
                 (("data_wait", self.data_wait), ("checkpoint", self.checkpoint), ("idle", self.idle))}
        return {
            "ratio": round(ratio, 4),
            "verdict": verdict(ratio),
            "source": self.source,
            "billed_gpu_s": round(self.billed, 3),
            "busy_gpu_s": round(self.busy, 3),
            "rest": share,  # shares of the billed GPU time
        }


def step_gpu_time(attempts: Iterable[Mapping[str, Any]], gpus: int) -> GpuTime:
    """A step's GPU time from its attempt records (``Attempt.to_dict()``) and its billed GPUs."""
    if gpus <= 0:
        return GpuTime()
    total = GpuTime(source="nvml")
    for a in attempts:
        usage = a.get("usage") or {}
        wall = float(a.get("duration_s", 0.0)) * gpus
        data = min(wall, float(usage.get("data_wait_s", 0.0)) * gpus)
        ckpt = min(wall - data, float(usage.get("checkpoint_s", 0.0)) * gpus)
        sampled = usage.get("gpu") or {}
        if sampled.get("source") == "nvml":
            # Measured on the devices the recording process saw; the billed GPUs of a step
            # whose ranks each saw their own are scaled from the ones measured.
            seen = max(1, int(sampled.get("devices", gpus) or gpus))
            busy, source = min(wall, float(sampled.get("busy_gpu_s", 0.0)) * gpus / seen), "nvml"
        else:
            busy, source = max(0.0, wall - data - ckpt), "estimated"
        total = total + GpuTime(wall, busy, data, ckpt, source)
    return total


def run_gpu_time(steps: Iterable[GpuTime]) -> GpuTime:
    total = GpuTime(source="nvml")
    seen = False
    for t in steps:
        if t.billed > 0:
            total, seen = total + t, True
    return total if seen else GpuTime()


def describe(eff: Mapping[str, Any] | None) -> str:
    """One line for a person: "GPU efficiency 78% (fair; >85% good, <70% investigate): the rest
    data wait 12%, checkpoint 6%, idle 4%"; "" without GPU time."""
    if not eff:
        return ""
    rest = eff.get("rest") or {}
    parts = [f"{name.replace('_', ' ')} {rest[key] * 100:.0f}%" for key, name in
             (("data_wait", "data wait"), ("checkpoint", "checkpoint"), ("idle", "idle")) if rest.get(key)]
    est = ", estimated without GPU samples" if eff.get("source") != "nvml" else ""
    line = f"GPU efficiency {eff['ratio'] * 100:.0f}% ({eff['verdict']}; >85% good, <70% investigate{est})"
    return line + (": the rest " + ", ".join(parts) if parts else "")


def receipt_line(receipt_path: str | os.PathLike[str] | None) -> str:
    """``describe`` of a receipt's run total ("" without a receipt or GPU time)."""
    if not receipt_path:
        return ""
    try:
        receipt = json.loads(Path(receipt_path).read_text())
    except (OSError, ValueError):
        return ""
    return describe((receipt.get("totals") or {}).get("gpu_efficiency"))
