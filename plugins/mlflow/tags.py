"""Turn receipts and GPU facts into short MLflow tags, and keep credentials out of them.

Stdlib only (torch is imported inside ``gpu_tags``). Tags are for search and display, so
they are flat and short; the full receipt goes to the run as ``receipt.json``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from interlock.core.run.redact import Redactor
from interlock.core.run.redact import is_secret_key as _is_secret_key

TAG_PREFIX = "interlock."
MAX_TAG_VALUE = 250  # "short": MLflow allows 8000, but tags are for the UI and search
REDACTED = "***redacted***"

# The rules are core's (interlock.core.run.redact), the same as receipts and logs; MLflow only
# spells the mask its own way.
_REDACTOR = Redactor(mask=REDACTED)


def is_secret_key(key: str) -> bool:
    return _is_secret_key(key)


def looks_secret(value: Any) -> bool:
    return _REDACTOR.contains_secret(value)


def is_secret(key: str, value: Any) -> bool:
    """True when the key names a credential or the value holds one."""
    return is_secret_key(key) or looks_secret(value)


def filter_secrets(tags: Mapping[str, Any]) -> dict[str, Any]:
    """``tags`` without the entries that are, or hold, credentials."""
    return {k: v for k, v in tags.items() if not is_secret(k, v)}


def redact(value: Any, _key: str = "") -> Any:
    """A copy of a JSON-like structure with credentials replaced by ``REDACTED``."""
    return _REDACTOR(value, _key)


def _short(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    elif isinstance(value, str | int | float):
        text = str(value)
    else:
        text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return text if len(text) <= MAX_TAG_VALUE else text[: MAX_TAG_VALUE - 3] + "..."


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _join(values: Iterable[Any]) -> str:
    seen: list[str] = []
    for v in values:
        if v not in (None, "") and str(v) not in seen:
            seen.append(str(v))
    return ",".join(seen)


def _named(mapping: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in mapping.items() if v not in (None, ""))


def _steps(receipt: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    steps = receipt.get("steps") or []
    if isinstance(steps, Mapping):  # {name: {...}}
        return [{"name": k, **v} for k, v in steps.items() if isinstance(v, Mapping)]
    return [s for s in steps if isinstance(s, Mapping)]


def _snapshot(receipt: Mapping[str, Any]) -> str:
    for key in ("snapshot", "snapshots", "data_snapshot", "data_snapshots", "snapshot_ids"):
        v = receipt.get(key)
        if isinstance(v, Mapping):
            return _named(v)
        if isinstance(v, list | tuple):  # ids, or the receipt's [{"id": ..., "node": ...}]
            return _join(s.get("id") if isinstance(s, Mapping) else s for s in v)
        if v not in (None, ""):
            return str(v)
    found: list[Any] = []
    for step in _steps(receipt):
        snaps = step.get("snapshots")
        found.extend(snaps if isinstance(snaps, list | tuple) else [step.get("snapshot")])
    return _join(found)


def _image(receipt: Mapping[str, Any]) -> str:
    for key in ("image", "images"):
        v = receipt.get(key)
        if isinstance(v, Mapping):
            unique = {str(x) for x in v.values() if x}
            return unique.pop() if len(unique) == 1 else _named(v)
        if v not in (None, ""):
            return str(v)
    per_step = {
        str(s.get("name") or s.get("step") or i): s.get("image_digest") or s.get("image")
        for i, s in enumerate(_steps(receipt))
    }
    unique = {v for v in per_step.values() if v}
    return unique.pop() if len(unique) == 1 else _named(per_step)


# Receipt parts too big or too structured for a tag; they live in receipt.json.
_SKIP = {"steps", "parameters", "params", "attempts", "inputs", "outputs", "metrics", "env"}


def receipt_tags(receipt: Mapping[str, Any] | None, *, prefix: str = TAG_PREFIX) -> dict[str, str]:
    """Flat, short, credential-free tags from a run receipt.

    Top-level scalars become ``interlock.<key>``; small nested mappings become
    ``interlock.<key>.<sub>``; ``interlock.git_sha``, ``interlock.snapshot`` and
    ``interlock.image`` are filled from wherever the receipt keeps them (top level, a
    ``git`` mapping, or the per-step records). A triggered run gets ``interlock.triggered_by.kind``,
    ``.trigger``, ``.time``, ``.uri`` and its drift figures as JSON in ``.figures``.
    """
    if not receipt:
        return {}
    if dataclasses.is_dataclass(receipt) and not isinstance(receipt, type):
        receipt = dataclasses.asdict(receipt)
    flat: dict[str, Any] = {}
    for key, value in receipt.items():
        key = str(key)
        if key in _SKIP or is_secret_key(key):
            continue
        if _scalar(value):
            flat[key] = value
        elif isinstance(value, Mapping) and len(value) <= 20:
            for sub, v in value.items():
                if _scalar(v) and not is_secret_key(str(sub)):
                    flat[f"{key}.{sub}"] = v
        elif isinstance(value, list | tuple) and all(_scalar(v) for v in value):
            flat[key] = _join(value)
    raw_git = receipt.get("git")
    git: Mapping[str, Any] = raw_git if isinstance(raw_git, Mapping) else {}
    flat.setdefault("git_sha", receipt.get("git_sha") or git.get("sha") or git.get("commit"))
    if "git_dirty" not in flat and "dirty" in git:
        flat["git_dirty"] = git["dirty"]
    cause = receipt.get("triggered_by")
    if isinstance(cause, Mapping) and cause.get("figures"):  # the drift figures, one JSON tag
        flat["triggered_by.figures"] = cause["figures"]
    flat["snapshot"] = _snapshot(receipt) or flat.get("snapshot")
    flat["image"] = _image(receipt) or flat.get("image")
    tags = {f"{prefix}{k}": _short(v) for k, v in flat.items() if v not in (None, "")}
    return filter_secrets(tags)


# Compute capability (major, minor) -> NVIDIA architecture name.
_ARCHITECTURES = {
    (6, 0): "Pascal", (6, 1): "Pascal", (7, 0): "Volta", (7, 2): "Volta", (7, 5): "Turing",
    (8, 0): "Ampere", (8, 6): "Ampere", (8, 7): "Ampere", (8, 9): "Ada Lovelace",
    (9, 0): "Hopper", (10, 0): "Blackwell", (10, 3): "Blackwell", (11, 0): "Blackwell",
    (12, 0): "Blackwell", (12, 1): "Blackwell",
}  # fmt: skip


def describe_device(
    *,
    name: str,
    major: int,
    minor: int,
    total_memory: int,
    cuda_version: str | None,
    device_count: int = 1,
    peak_reserved: int = 0,
) -> dict[str, Any]:
    """GPU facts from the plain values torch reports for a device (kept pure for testing)."""
    out: dict[str, Any] = {
        "gpu_name": name,
        "gpu_count": device_count,
        "gpu_memory_gb": round(total_memory / 2**30, 1),
        "gpu_architecture": _ARCHITECTURES.get((major, minor), f"sm_{major}{minor}"),
        "compute_capability": f"{major}.{minor}",
        "cuda_version": cuda_version,
    }
    if peak_reserved > 0:  # the peak this process needed: a floor for the VRAM to ask for
        out["minimum_vram_gb"] = math.ceil(peak_reserved / 2**30)
    return out


def gpu_tags(
    *,
    precision: str | None = None,
    minimum_vram_gb: float | None = None,
    gpu_architecture: str | None = None,
    cuda_version: str | None = None,
    compute_capability: str | None = None,
    device: int = 0,
) -> dict[str, str]:
    """GPU facts for a model version's tags, derived from torch when CUDA is available.

    Call it in the training process (``minimum_vram_gb`` defaults to the peak memory torch
    reserved there) and carry the dict to ``register(..., gpu=...)``. Explicit values win.
    On a machine without CUDA only the explicit values come back: ``{}`` when none.
    """
    derived: dict[str, Any] = {}
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        props = torch.cuda.get_device_properties(device)
        derived = describe_device(
            name=props.name,
            major=props.major,
            minor=props.minor,
            total_memory=props.total_memory,
            cuda_version=torch.version.cuda,
            device_count=torch.cuda.device_count(),
            peak_reserved=torch.cuda.max_memory_reserved(device),
        )
    explicit = {
        "precision": precision,
        "minimum_vram_gb": minimum_vram_gb,
        "gpu_architecture": gpu_architecture,
        "cuda_version": cuda_version,
        "compute_capability": compute_capability,
    }
    merged = {**derived, **{k: v for k, v in explicit.items() if v is not None}}
    return {k: _short(v) for k, v in merged.items() if v is not None}
