"""What a step ran on, for the receipt's GPU-seconds and cost: billed from what ran, not
from what was requested.

A step may say it (``ctx.report_device(torch_device)``); otherwise the shim looks at the
process it ran in: the GPUs it could see (torch's count when torch is already imported,
else the NVIDIA device files, narrowed by CUDA_VISIBLE_DEVICES). A local run on a host
without CUDA bills 0 GPU-seconds; the request stays in the receipt as ``requested``. Never
imports torch.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Any

DEVICE_FACT = "_device"  # the fragment fact the shim keeps it under (not a user fact)
_GPU_TYPES = {"cuda", "gpu", "rocm", "hip"}


def device_record(device: Any, count: int | None = None, *, source: str = "reported") -> dict[str, Any]:
    """{"type", "count", "source"} from "cuda", "cuda:1", "cpu", a torch.device, ..."""
    kind = str(getattr(device, "type", None) or device).split(":", 1)[0].strip().lower() or "cpu"
    gpus = (1 if count is None else int(count)) if kind in _GPU_TYPES else 0
    return {"type": kind, "count": max(0, gpus), "source": source}


def visible_gpus() -> int:
    """GPUs this process can use (0 on a host without CUDA)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return int(torch.cuda.device_count())
        except Exception:  # noqa: BLE001 - a broken CUDA install sees no GPU
            return 0
    present = len(glob.glob("/dev/nvidia[0-9]*"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        listed = [d for d in visible.split(",") if d.strip() and d.strip() != "-1"]
        present = min(present, len(listed))
    return present


def detected_device(requested: int) -> dict[str, Any]:
    """What the shim records when the step did not say: the request when GPUs are visible
    (they were allocated), else the CPU."""
    if requested and visible_gpus() > 0:
        return {"type": "cuda", "count": requested, "source": "detected"}
    return {"type": "cpu", "count": 0, "source": "detected"}


def billed_gpus(requested: int, record: dict[str, Any] | None) -> int:
    """GPUs to bill for a step: what ran when known; the request for records without it."""
    if not isinstance(record, dict):
        return requested
    try:
        return max(0, int(record.get("count", 0)))
    except (TypeError, ValueError):
        return requested


def group_device(records: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """What the ranks of a distributed step ran on, together: their GPUs summed (a rank that
    saw no GPU adds none). None when no rank recorded its device (bill the request)."""
    seen = [r for r in records if isinstance(r, dict)]
    if not seen:
        return None
    gpus = sum(billed_gpus(0, r) for r in seen)
    kinds = sorted({str(r.get("type", "cpu")) for r in seen})
    kind = next((k for k in kinds if k in _GPU_TYPES), kinds[0]) if gpus else "cpu"
    return {"type": kind, "count": gpus, "source": "ranks", "ranks": len(seen)}
