"""``il.map(..., tolerate=...)`` on Argo (emulated).

Argo's ``continueOn`` would let a map's readers run after failed items, but its aggregated
outputs leave a failed item out of the list, so the readers' list would shift. Instead each
item's task succeeds with an envelope (``{"i": 3, "ok": true, "outputs": {...}}`` or
``{"i": 3, "ok": false, "error": "FATAL: ..."}``) after the shim has retried it in the pod, and
a ``<node>-tolerance`` task after the map reads the envelopes: it fails when more items failed
than the map allows, else hands the readers each output as the list with None at failed
items (as kfp's emulation does; not for artifact outputs).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from interlock.core.base.errors import StepFailed, StepStopped
from interlock.core.model.codecs import to_jsonable
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import StepSpec
from interlock.core.run.records import ALL_KINDS

ENVELOPE = "envelope"  # no dash: the readers' expression reads it as a field


def run_item(run: Any, step: StepSpec, name: str, index: int, prepare: Any, out: Path) -> int:
    """One item of a tolerant map: its envelope says what came of it; the task itself succeeds
    (Argo does not retry a task that succeeds, so the shim retries every kind in the pod)."""
    from interlock.core.run.runtime import execute_step

    def envelope(outputs: dict[str, Any]) -> None:
        # Inside the attempt: a value that cannot be serialized fails the item, and counts.
        data = {p.name: to_jsonable(outputs[p.name], p.type) for p in step.outputs}
        _write(out, {"i": index, "ok": True, "outputs": data})

    try:
        execute_step(replace(run, retry_in_process=ALL_KINDS), step, name, prepare, write=envelope)
    except StepStopped as exc:
        print(f"interlock: {exc.headline()}", file=sys.stderr, flush=True)
        return exc.exit_code
    except StepFailed as exc:
        print(f"interlock: {exc.headline()} (tolerated by the map unless too many items fail)", file=sys.stderr,
              flush=True)
        _write(out, {"i": index, "ok": False, "error": f"{exc.kind}: {exc.reason}"})
    return 0


def _write(out: Path, envelope: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / ENVELOPE).write_text(json.dumps(envelope, allow_nan=True))


def check(spec: PipelineSpec, node: str, gathered: str, out: Path) -> int:
    """The ``<node>-tolerance`` task: the items' envelopes against the map's tolerance."""
    from interlock.core.run.map_items import MapReport, check_tolerance

    from .exit_codes import GAVE_UP

    n = spec.node(node)
    assert n.map is not None
    envelopes = sorted((json.loads(e) for e in json.loads(gathered)), key=lambda e: e["i"])
    failed = [e["i"] for e in envelopes if not e["ok"]]
    report = MapReport(node, len(envelopes), failed, allowed_failures=n.map.allowed_failures(len(envelopes)))
    why = check_tolerance(report, spec.name)
    if why is not None:
        print(f"interlock: map {node!r} failed: {why}", file=sys.stderr, flush=True)
        return GAVE_UP
    out.mkdir(parents=True, exist_ok=True)
    for p in spec.step_of(n).outputs:
        values = [e["outputs"][p.name] if e["ok"] else None for e in envelopes]
        (out / p.name).write_text(json.dumps(values, allow_nan=True))
    return 0
