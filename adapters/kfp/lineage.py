"""Record a kfp-local run's lineage: the run description built from the receipt and the
artifact URIs kfp assigned, handed to the installed lineage provider (core's seam,
``interlock.core.record.lineage``; the mlmd plugin records it in ML Metadata).

When no provider is installed or set up, the run is not recorded and one log line says
why. Lineage never fails a run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interlock.core.base.errors import LineageUnavailable
from interlock.core.base.status import Status
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.lineage import lineage_provider
from interlock.core.record.lineage_record import mark_recorded

from .names import io_names
from .types import ARTIFACT_CLASSES

log = logging.getLogger("interlock.kfp.lineage")


def _is_artifact(value: Any) -> bool:
    return hasattr(value, "uri") and hasattr(value, "schema_title")


def _port_entry(name: str, art: Any, *, with_properties: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "uri": art.uri, "type": type(art).schema_title}
    if with_properties:
        entry["properties"] = {k: v for k, v in dict(art.metadata or {}).items() if v is not None}
    return entry


def run_description(spec: PipelineSpec, receipt: dict[str, Any], records: Mapping[str, Any]) -> dict[str, Any]:
    """The run record for LineageProvider.record_run: steps with their artifact URIs."""
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
        # Named as KFP names them (names.py: ``model``, not the port's ``o0``), as KFP's own
        # MLMD records on a cluster name an output artifact and its events.
        names_in, _ = io_names(step)
        port_of_in = {v: k for k, v in names_in.items()}
        inputs = [
            _port_entry(port_of_in.get(k, k), v, with_properties=False)
            for k, v in sorted(rec.inputs.items()) if _is_artifact(v)
        ]
        outputs = [_port_entry(k, v, with_properties=True) for k, v in sorted(rec.outputs.items()) if _is_artifact(v)]
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
    enabled: bool = True,
) -> str | None:
    """Record the run; returns where, or None when skipped (logged, never raised)."""
    # This adapter handles kfp-local's lineage (kfp's own artifact URIs): il.run then does not.
    try:
        receipt = json.loads(Path(receipt_path).read_text())
    except (OSError, ValueError) as exc:  # lineage must never fail a training run
        log.warning("lineage not recorded: cannot read the receipt: %s", exc)
        return None
    mark_recorded(Path(receipt_path).parent, receipt["run_id"], None, by="kfp-local")
    if not enabled:
        return None
    try:
        provider = lineage_provider()
    except LineageUnavailable as exc:  # none installed: lineage is optional
        log.info("lineage not recorded: %s", exc.message)
        return None
    try:
        run = run_description(spec, receipt, records)
        where = provider.record_run(run, workdir=Path(workdir))
    except LineageUnavailable as exc:
        log.info("lineage not recorded (%s not configured): %s", provider.title, exc.message)
        return None
    except Exception as exc:  # lineage must never fail a training run
        log.warning("lineage not recorded: %s", exc)
        return None
    log.info("lineage recorded in %s", where)
    return where


__all__ = ["ARTIFACT_CLASSES", "record_lineage", "run_description"]
