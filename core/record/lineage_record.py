"""Lineage for every backend that runs here, through the lineage seam.

kfp-local records its runs itself, at the end of each run, with the artifact URIs kfp
assigned (adapters/kfp/lineage.py), and says so with a marker in the run's state
(``mark_recorded``). For any other backend ``il.run`` builds the run record, from the spec
(which output feeds which input), the receipt (states, attempts, snapshots, git) and where
the artifacts are, and keeps it in the run's state (``STATE/lineage.json``, pending);
``interlock lineage`` records every pending run of its work directory before it answers
(``flush_pending``). So a run starts no provider worker (the metadata store's costs about
1.5 s a run), every run is in the store whenever anyone asks, and runs from before the
provider was set up are recorded once it is. Where artifacts are:

- ``local``: each output is a file or directory under ``RUN_DIR/values/NODE/PORT``, kept
  after the run: its ``file://`` URI is recorded (a cache hit: the producing run's file, so
  both runs share one artifact: providers de-duplicate artifacts by URI).
- ``flyte-local`` (and any backend that keeps no per-run artifact files): flytekit's local
  outputs live in temporary directories that are gone after the run, so each artifact is
  recorded under a run-scoped id, ``interlock-run://RUN_ID/NODE/PORT``. The chain (which
  snapshot, which steps, which model) is the same; the URI names no file.

Only artifact ports (DataFrame, Dataset, Model, Metrics, lists of artifacts) are recorded,
as KFP would: plain values are parameters, not artifacts. Lineage never fails a run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from interlock.core.base.errors import LineageUnavailable
from interlock.core.model.codecs import METRICS_FILE, TypeKind
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import BindingKind
from interlock.core.run.env import run_dir_under, state_dir_of

if TYPE_CHECKING:
    from interlock.core.record.lineage import LineageProvider
    from interlock.core.record.outcomes import RunResult

__all__ = ["MARKER", "RUN_SCHEME", "flush_pending", "mark_recorded", "pending", "record_lineage_after", "run_record"]

log = logging.getLogger("interlock.lineage")

MARKER = "lineage.json"  # in the run's state dir: who recorded this run's lineage, where, when
RUN_SCHEME = "interlock-run"
# KFP's own artifact type names (what kfp-local records for the same ports).
_TYPES = {
    TypeKind.DATAFRAME: "system.Dataset",
    TypeKind.DATASET: "system.Dataset",
    TypeKind.ARTIFACTS: "system.Dataset",
    TypeKind.MODEL: "system.Model",
    TypeKind.METRICS: "system.Metrics",
}

UriOf = Callable[[str, str], str]  # (node, port) -> URI


def mark_recorded(state_dir: Path, run_id: str, where: str | None, *, by: str) -> None:
    """Say that ``by`` handled this run's lineage (``where`` None: it chose not to record)."""
    path = Path(state_dir) / MARKER
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run_id": run_id, "where": where, "by": by, "at": time.time()}))


def _recorded_since(state_dir: Path, run_id: str, since: float) -> bool:
    try:
        mark = json.loads((Path(state_dir) / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return mark.get("run_id") == run_id and float(mark.get("at", 0)) >= since


def uris_for(workdir: Path, receipt: Mapping[str, Any]) -> UriOf:
    """Where each output is: under the run's ``values`` folder (local), for a cache hit under
    the producing run's (its ``cached_from_run``, so both runs share one artifact), else a
    run-scoped id."""
    run_id = str(receipt["run_id"])
    source = {s["node"]: (s.get("facts") or {}).get("cached_from_run") or run_id for s in receipt.get("steps", [])}

    def uri_of(node: str, port: str) -> str:
        producer = source.get(node, run_id)
        path = run_dir_under(workdir, producer) / "values" / node / port
        if path.exists():
            return path.resolve().as_uri()
        return f"{RUN_SCHEME}://{producer}/{node}/{port}"

    return uri_of


def run_record(spec: PipelineSpec, receipt: Mapping[str, Any], uri_of: UriOf) -> dict[str, Any]:
    """The run record of ``core.lineage`` for a finished run: steps that ran (or were cached),
    their artifact inputs (from the spec's edges) and outputs."""
    snapshots: dict[str, list[str]] = {}
    for snap in receipt.get("snapshots", []):
        snapshots.setdefault(snap.get("node", ""), []).append(str(snap["id"]))
    by_node = {s["node"]: s for s in receipt.get("steps", [])}
    ran = {n for n, s in by_node.items() if s.get("status") in ("succeeded", "failed", "cached")}
    steps = []
    for node in spec.nodes:
        if node.name not in ran:
            continue
        step = spec.step_of(node)
        entry = by_node[node.name]
        inputs = []
        for port, binding in sorted(node.inputs):
            if binding.kind is not BindingKind.OUTPUT or binding.node not in ran or binding.field:
                continue
            up = spec.step_of(spec.node(binding.node))
            out_port = next((p for p in up.outputs if p.name == binding.port), None)
            if out_port is None or out_port.type.kind not in _TYPES:
                continue
            inputs.append({"name": port, "uri": uri_of(binding.node, binding.port), "type": _TYPES[out_port.type.kind]})
        outputs = []
        if entry.get("status") != "failed":
            for p in step.outputs:
                if p.type.kind in _TYPES:
                    out = {"name": p.name, "uri": uri_of(node.name, p.name), "type": _TYPES[p.type.kind]}
                    props = _metrics_properties(out["uri"], p.type.kind)
                    if props:
                        out["properties"] = props
                    outputs.append(out)
        attempts = entry.get("attempts") or []
        kinds = entry.get("failure_kinds") or []
        steps.append({
            "name": node.name,
            "state": {"succeeded": "COMPLETE", "cached": "CACHED"}.get(entry.get("status"), "FAILED"),
            "cached": bool(entry.get("cached")),
            "image": entry.get("image"),
            "image_digest": entry.get("digest"),
            "fingerprint": step.fingerprint,
            "snapshots": snapshots.get(node.name, []),
            "started": attempts[0].get("started") if attempts else None,
            "ended": attempts[-1].get("ended") if attempts else None,
            "attempts": len(attempts),
            "failure_kind": kinds[-1] if kinds else None,
            "inputs": inputs,
            "outputs": outputs,
        })
    git = receipt.get("git") or {}
    return {
        "pipeline": spec.name,
        "run_id": receipt["run_id"],
        "backend": receipt.get("backend"),
        "git_sha": git.get("sha"),
        "git_dirty": git.get("dirty"),
        "parameters": receipt.get("parameters"),
        "steps": [{k: v for k, v in s.items() if v is not None or k in ("image", "failure_kind")} for s in steps],
    }


def _metrics_properties(uri: str, kind: TypeKind) -> dict[str, Any]:
    """An il.Metrics output's numbers, so that a query shows them (as kfp-local records)."""
    if kind is not TypeKind.METRICS or not uri.startswith("file://"):
        return {}
    path = Path(unquote(urlparse(uri).path))
    path = path / METRICS_FILE if path.is_dir() else path
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)} if isinstance(data, dict) else {}


def record_lineage_after(
    spec: PipelineSpec, result: RunResult, workdir: Path, state_dir: Path, *, since: float
) -> Path | None:
    """Keep ``result``'s run record in its state (``STATE/lineage.json``, pending) unless the
    backend recorded the run itself (its marker is newer than ``since``); returns the file,
    or None. Cheap (no provider, no worker): ``flush_pending`` records it. Never raises."""
    if _recorded_since(state_dir, result.run_id, since) or result.receipt_path is None:
        return None
    try:
        receipt = json.loads(Path(result.receipt_path).read_text())
        record = run_record(spec, receipt, uris_for(Path(workdir), receipt))
        path = Path(state_dir) / MARKER
        path.write_text(json.dumps({"run_id": result.run_id, "where": None, "by": "interlock", "at": time.time(),
                                    "pending": True, "run": record}, default=str))
    except Exception as exc:  # lineage must never fail a training run
        log.warning("lineage not kept for run %s: %s", result.run_id, exc)
        return None
    return path


def pending(workdir: Path) -> list[Path]:
    """The runs of ``workdir`` whose lineage is kept but not recorded yet (oldest first)."""
    runs = Path(workdir) / "runs"
    found = []
    for run_dir in runs.iterdir() if runs.is_dir() else ():
        marker = state_dir_of(run_dir) / MARKER
        try:
            if json.loads(marker.read_text()).get("pending"):
                found.append(marker)
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda p: p.stat().st_mtime)


def flush_pending(provider: LineageProvider, workdir: Path) -> list[str]:
    """Record every pending run of ``workdir`` with ``provider``; returns their run ids.

    ``interlock lineage`` calls it before it answers, so a run is in the store whenever
    anyone asks, and a run from before the provider was set up is recorded once it is.
    Recording a run twice (two queries at once) is harmless: the provider keys steps by
    run and step. Stops quietly when the provider is not set up."""
    done = []
    for marker in pending(workdir):
        try:
            mark = json.loads(marker.read_text())
            where = provider.record_run(mark["run"], workdir=Path(workdir))
        except LineageUnavailable:
            break  # not set up: the query that follows says so
        except Exception as exc:  # one bad record never hides the others
            log.warning("lineage of %s not recorded: %s", marker.parent.parent.name, exc)
            continue
        mark.update(pending=False, where=where, recorded_at=time.time())
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps(mark, default=str))
        tmp.replace(marker)
        done.append(str(mark["run_id"]))
    return done
