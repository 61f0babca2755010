"""What a run report reads: the run's folder, its receipt (or, for a run still going, its
step fragments), the spec it ran, and the metric points its steps logged.

A run lives in ``<workdir>/runs/<run id>/state`` (runstate.state_dir_under), the folder
``--resume`` and ``interlock lineage`` use. The spec is recorded there when the run starts
(``spec.json``), so a report can be drawn later without importing the pipeline's code.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.base.errors import RecordError, RunIdError
from interlock.core.base.status import Status
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.run.env import state_dir_under
from interlock.core.run.files import write_text_atomic
from interlock.core.run.metrics import PROGRESS, MetricPoint, read_points
from interlock.core.run.redact import Redactor, is_secret_key
from interlock.core.run.state import RunState

SPEC_FILE = "spec.json"
REPORT_FILE = "report.html"


def record_spec(state_dir: Path, spec: PipelineSpec, params: Mapping[str, Any] | None = None) -> Path:
    """Keep the spec a run ran with, next to its parameters (a report draws its graph from it).

    Every text in it goes through the receipt's redactor, knowing this run's secret values:
    a parameter's default or a constant input may be a password, and nothing under the run's
    state may carry one (the receipt masks them; so does this)."""
    redactor = Redactor.for_values({**spec.defaults(), **(params or {})})
    path = Path(state_dir) / SPEC_FILE
    write_text_atomic(path, _spec_text(spec, redactor))
    return path


def record_cause(state: RunState, cause: Any, params: Mapping[str, Any]) -> None:
    """Write why the run started (an ``il.Cause``) for its receipt, masked as its parameters
    are: a data URI may hold a password, and a parameter's secret never reaches the disk."""
    state.write_cause(Redactor.for_values(dict(params))(cause.to_json()))


def _spec_text(spec: PipelineSpec, redactor: Redactor) -> str:
    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: masked_const(v) if is_secret_key(k) and _is_const(v) else scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return redactor.text(value) if isinstance(value, str) else value

    def masked_const(binding: dict[str, Any]) -> dict[str, Any]:
        # A node's input {port: {"const": value}}: the port's name, not the "const" key, says
        # whether the constant is a credential.
        return {**binding, "const": redactor.mask if binding["const"] not in (None, "") else binding["const"]}

    # Compact: json's C encoder (as write_json_atomic(..., indent=None) wrote it).
    return json.dumps(scrub(spec.to_json()), sort_keys=True, indent=None, default=str)


def _is_const(value: Any) -> bool:
    return isinstance(value, dict) and "const" in value and len(value) == 1


def load_spec(state_dir: Path) -> PipelineSpec | None:
    try:
        return PipelineSpec.from_json(json.loads((Path(state_dir) / SPEC_FILE).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def runs_in(workdir: Path, limit: int = 10) -> list[str]:
    """The newest run ids in a work directory (for an error's hint)."""
    runs = Path(workdir) / "runs"
    found = sorted((p for p in runs.iterdir() if (p / "state").is_dir()), key=lambda p: p.stat().st_mtime) if runs.is_dir() else []
    return [p.name for p in found[-limit:]]


def find_run(run_id: str, workdir: Path) -> Path:
    """The state directory of run ``run_id`` in ``workdir``; RunIdError naming the runs there."""
    state = state_dir_under(Path(workdir), run_id)
    if not state.is_dir():
        raise RunIdError(
            f"no run {run_id} in {workdir}",
            hint=f"runs there: {', '.join(runs_in(workdir)) or 'none'}; check --workdir (or $INTERLOCK_WORKDIR)",
        )
    return state


_NUMBER = (int, float)
# What a reader of a receipt relies on: each key's type when present (None is allowed).
_RECEIPT_SHAPE: dict[str, tuple[type, ...]] = {
    "pipeline": (str,), "run_id": (str,), "backend": (str,), "status": (str,), "started": _NUMBER,
    "ended": _NUMBER, "steps": (list,), "totals": (dict,), "parameters": (dict,), "git": (dict,),
    "snapshots": (list,), "cache_hits": (list,), "outputs": (dict,),
}
_STEP_SHAPE: dict[str, tuple[type, ...]] = {
    "node": (str,), "step": (str,), "status": (str,), "attempts": (list,), "facts": (dict,),
    "duration_s": _NUMBER, "image": (str,),
}


def _shape_problem(data: Any, shape: dict[str, tuple[type, ...]], where: str) -> str | None:
    if not isinstance(data, dict):
        return f"{where} is {type(data).__name__}, not an object"
    for key, types in shape.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool) and bool not in types):
            return f"{where}{key!r} is {type(value).__name__} {json.dumps(value, default=str)[:40]}"
    return None


def receipt_problem(data: Any) -> str | None:
    """Why ``data`` (a parsed receipt.json) is not a receipt interlock wrote, or None."""
    problem = _shape_problem(data, _RECEIPT_SHAPE, "")
    if problem is not None:
        return problem
    for i, step in enumerate(data.get("steps") or []):
        problem = _shape_problem(step, _STEP_SHAPE, f"steps[{i}]")
        if problem is None and any(not isinstance(a, dict) for a in step.get("attempts") or []):
            problem = f"steps[{i}] has an attempt that is not an object"
        if problem is not None:
            return problem
    return None


def load_receipt(path: Path) -> dict[str, Any] | None:
    """The receipt at ``path``; None when there is none (or it is torn: JSON that does not
    parse, as a crash mid-write leaves); RecordError naming the file when it parses but is
    not a receipt."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    problem = receipt_problem(data)
    if problem is not None:
        raise RecordError(f"{path} is not a receipt interlock wrote: {problem}",
                          hint="move it aside: the step fragments under receipts/ still record the run")
    return dict(data)


def read_receipt(state_dir: Path, spec: PipelineSpec | None) -> tuple[dict[str, Any], bool]:
    """The run's receipt, and True; for a run without one yet (still running, or killed), a
    receipt-shaped summary of its step fragments, and False. RecordError for a receipt.json
    of the wrong shape."""
    receipt = load_receipt(Path(state_dir) / "receipt.json")
    if receipt is not None:
        return receipt, True
    run_id = Path(state_dir).parent.name
    state = RunState(Path(state_dir), run_id)
    names = [n.name for n in (*spec.nodes, *((spec.finally_,) if spec.finally_ else ()))] if spec else [
        p.stem for p in sorted((Path(state_dir) / "receipts").glob("*.json"))]
    frags = state.fragments(names)
    steps = []
    for name in names:
        f = frags.get(name)
        status = str(f.status) if f else str(Status.NOT_RUN)
        if f and f.attempts and not f.attempts[-1].ended:
            status = "running"
        steps.append({"node": name, "step": f.step if f else name, "status": status,
                      "cached": bool(f and f.status is Status.CACHED),
                      "attempts": [a.to_dict() for a in f.attempts] if f else [],
                      "duration_s": sum(a.duration_s for a in f.attempts) if f else 0.0,
                      "facts": f.facts if f else {}, "image": f.image if f else None})
    params: Any = {}
    try:
        params = json.loads(state.params_path.read_text()).get("params", {})
    except (OSError, ValueError, AttributeError):
        pass
    if not isinstance(params, dict):
        params = {}
    starts = [a["started"] for s in steps for a in s["attempts"]]
    return {
        "pipeline": spec.name if spec else "?", "run_id": run_id, "backend": "?", "status": "running",
        "started": min(starts) if starts else time.time(), "ended": time.time(), "parameters": params,
        "steps": steps, "snapshots": [], "git": {}, "totals": {},
    }, False


@dataclass(frozen=True)
class Curve:
    node: str
    name: str
    by_attempt: dict[int, list[tuple[float, float]]]


def curves(state_dir: Path) -> tuple[list[Curve], list[MetricPoint], dict[str, MetricPoint]]:
    """Per-step metric curves (points with a step), single figures (no step), and the last
    progress point of each step."""
    series: dict[tuple[str, str], dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    singles: list[MetricPoint] = []
    progress: dict[str, MetricPoint] = {}
    for p in read_points(state_dir):
        if p.kind == PROGRESS:
            progress[p.node] = p
        elif p.step is None:
            singles.append(p)
        else:
            series[(p.node, p.name)][p.attempt].append((float(p.step), p.value))
    out = [Curve(node, name, {a: sorted(v) for a, v in sorted(att.items())}) for (node, name), att in series.items()]
    return out, singles, progress


def gate_outcomes(spec: PipelineSpec, statuses: dict[str, str]) -> dict[str, str]:
    """A gate whose block ran (any step in it not skipped) was taken; one whose block was all
    skipped was not; none when nothing in it was reached."""
    out: dict[str, str] = {}
    for g in spec.gates:
        members = [n.name for n in spec.nodes if g.id in {c.id for c in spec.gate_chain(n.gate)}]
        seen = [statuses.get(m, "") for m in members]
        if any(s not in ("skipped", "not-run", "") for s in seen):
            out[g.id] = "taken"
        elif seen and all(s == "skipped" for s in seen):
            out[g.id] = "not-taken"
    return out
