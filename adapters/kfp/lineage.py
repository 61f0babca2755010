"""Record a kfp-local run in ML Metadata: the run description built from the receipt and
the artifact URIs kfp assigned, handed to the mlmd plugin (``LineageStore.record_run``).

ml-metadata runs in its own interpreter (protobuf pins); when none is configured the run
is not recorded and one log line says how to enable it. Lineage never fails a run.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interlock.core.spec import PipelineSpec
from interlock.core.status import Status

from .names import io_names
from .types import ARTIFACT_CLASSES

log = logging.getLogger("interlock.kfp.lineage")

SQLITE_ENV = "INTERLOCK_MLMD_SQLITE"


def store_path(workdir: Path, extra: Mapping[str, Any] | None = None) -> Path:
    """Where kfp-local runs record lineage: RunOptions.extra["mlmd_sqlite"], $INTERLOCK_MLMD_SQLITE,
    else <workdir>/lineage/mlmd.sqlite."""
    explicit = (extra or {}).get("mlmd_sqlite") or os.environ.get(SQLITE_ENV)
    return Path(explicit) if explicit else Path(workdir) / "lineage" / "mlmd.sqlite"


def _is_artifact(value: Any) -> bool:
    return hasattr(value, "uri") and hasattr(value, "schema_title")


def _port_entry(name: str, art: Any, *, with_properties: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "uri": art.uri, "type": type(art).schema_title}
    if with_properties:
        entry["properties"] = {k: v for k, v in dict(art.metadata or {}).items() if v is not None}
    return entry


def run_description(spec: PipelineSpec, receipt: dict[str, Any], records: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON run record for LineageStore.record_run: steps with their artifact URIs."""
    snapshots: dict[str, list[str]] = {}
    for snap in receipt.get("snapshots", []):
        snapshots.setdefault(snap.get("node", ""), []).append(str(snap["id"]))
    by_node = {s["node"]: s for s in receipt.get("steps", [])}
    steps = []
    for node in spec.nodes:
        rec = records.get(node.name)
        if rec is None:
            continue
        step = spec.step_of(node)
        names_in, names_out = io_names(step)
        port_of_in = {v: k for k, v in names_in.items()}
        port_of_out = {v: k for k, v in names_out.items()}
        inputs = [
            _port_entry(port_of_in.get(k, k), v, with_properties=False)
            for k, v in sorted(rec.inputs.items()) if _is_artifact(v)
        ]
        outputs = [
            _port_entry(port_of_out.get(k, k), v, with_properties=True)
            for k, v in sorted(rec.outputs.items()) if _is_artifact(v)
        ]
        entry = by_node.get(node.name, {})
        kinds = entry.get("failure_kinds") or []
        steps.append({
            "name": node.name,
            "state": "COMPLETE" if rec.status is Status.SUCCEEDED else "FAILED",
            "cached": bool(rec.cached),
            "image": entry.get("image"),
            "image_digest": entry.get("digest"),
            "fingerprint": step.fingerprint,
            "snapshots": snapshots.get(node.name, []),
            "started": rec.started,
            "ended": rec.ended,
            "attempts": len(entry.get("attempts") or []),
            "failure_kind": kinds[-1] if kinds else None,
            "inputs": inputs,
            "outputs": outputs,
        })
    git = receipt.get("git") or {}
    return {
        "pipeline": spec.name,
        "run_id": receipt["run_id"],
        "backend": receipt.get("backend", "kfp-local"),
        "git_sha": git.get("sha"),
        "git_dirty": git.get("dirty"),
        "parameters": receipt.get("parameters"),
        "steps": steps,
    }


def record_lineage(
    spec: PipelineSpec,
    receipt_path: Path,
    records: Mapping[str, Any],
    *,
    workdir: Path,
    extra: Mapping[str, Any] | None = None,
) -> Path | None:
    """Record the run; returns the store path, or None when skipped (logged, never raised)."""
    if (extra or {}).get("lineage") is False:
        return None
    try:
        from interlock.plugins.mlmd import LineageStore, MlmdUnavailable
    except ImportError as exc:  # the plugin is optional
        log.info("lineage not recorded: the mlmd plugin is not importable (%s)", exc)
        return None
    path = store_path(workdir, extra)
    try:
        run = run_description(spec, json.loads(Path(receipt_path).read_text()), records)
        with LineageStore(sqlite_path=path) as store:
            store.record_run(run)
    except MlmdUnavailable as exc:
        log.info("lineage not recorded (ML Metadata not configured): %s", exc.message)
        return None
    except Exception as exc:  # lineage must never fail a training run
        log.warning("lineage not recorded: %s", exc)
        return None
    log.info("lineage recorded in %s", path)
    return path


__all__ = ["ARTIFACT_CLASSES", "record_lineage", "run_description", "store_path"]
