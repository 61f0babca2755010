"""The run report: one self-contained HTML page per run, next to its receipt.

The graph coloured by outcome, a timeline of steps and attempts (retries, waits, cache hits),
training curves from ``ctx.log_metric(..., step=...)``, cost, and the receipt's facts (data
snapshots, git SHA, images, parameters, what each step recorded). Written at the end of every
run that ``il.run`` starts (``<state>/report.html``) and by ``interlock show RUN_ID``.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from interlock.core.base.durations import format_duration
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.efficiency import describe
from interlock.core.record.run_data import (
    REPORT_FILE,
    Curve,
    curves,
    find_run,
    gate_outcomes,
    load_spec,
    read_receipt,
)
from interlock.core.report import graph_model
from interlock.core.report.html_page import legend, page
from interlock.core.report.svg import esc
from interlock.core.report.svg_chart import Series, line_chart
from interlock.core.report.svg_graph import STATUS_COLOURS, Outcome, render_svg
from interlock.core.report.svg_timeline import Row, timeline
from interlock.core.run.files import write_text_atomic
from interlock.core.run.metrics import MetricPoint
from interlock.core.run.state import RunState

log = logging.getLogger("interlock.report")


def _when(ts: float | None) -> str:
    if not ts:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _dur(seconds: Any) -> str:
    """A step's time: milliseconds matter in a fast local run, days on a cluster."""
    s = float(seconds or 0.0)
    return "<1ms" if 0 < s < 0.001 else format_duration(round(s, 3))


def _usd(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "-"
    return f"${v:.2f}" if v >= 1 else f"${v:.6f}".rstrip("0").rstrip(".") if v else "$0"


def _pill(status: str) -> str:
    fill, stroke = STATUS_COLOURS.get(status, ("#eceff1", "#546e7a"))
    return f'<span class="pill" style="background:{fill};color:{stroke};border:1px solid {stroke}">{esc(status)}</span>'


def _note(step: dict[str, Any], progress: Any) -> str:
    if step.get("cached"):
        src = (step.get("facts") or {}).get("cached_from_run")
        return "cache hit" + (f" (run {src})" if src else "")
    mapped = (step.get("facts") or {}).get("map")
    attempts = step.get("attempts") or []
    if not attempts:
        return ""
    bits = []
    if mapped:
        bits.append(f"{len(mapped.get('entries', []))} items")
    elif len(attempts) > 1:
        bits.append(f"{len(attempts)} attempts")
    bits.append(_dur(step.get("duration_s")))
    if progress is not None and progress.of:
        bits.append(f"{progress.name} {progress.value:g}/{progress.of:g}")
    return ", ".join(bits)


def _facts_table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows if v)
    return f'<table class="facts">{body}</table>'


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return f"<code>{esc(text)}</code>"


def _failure_box(receipt: dict[str, Any]) -> str:
    for step in receipt.get("steps", []):
        fails = [a.get("failure") for a in step.get("attempts", []) if a.get("failure")]
        if step.get("status") in ("failed", "stopped", "killed") and fails:
            f = fails[-1]
            hint = f"<br>hint: {esc(f['hint'])}" if f.get("hint") else ""
            return (f'<div class="failure"><b>{esc(step["node"])}</b> {esc(step["status"])}: '
                    f'<b>{esc(f.get("kind", ""))}</b> {esc(f.get("reason", ""))}'
                    f'<br><code>{esc(f.get("exc_type", ""))}: {esc(f.get("message", ""))[:400]}</code>{hint}</div>')
    return ""


def _graph(spec: PipelineSpec | None, receipt: dict[str, Any], progress: dict[str, Any]) -> str:
    if spec is None:
        return '<p class="sub">No pipeline spec was recorded with this run (it predates spec.json).</p>'
    steps = {s["node"]: s for s in receipt.get("steps", [])}
    statuses = {n: str(s.get("status")) for n, s in steps.items()}
    outcomes = {n: Outcome(statuses[n], _note(s, progress.get(n))) for n, s in steps.items()}
    for gate, taken in gate_outcomes(spec, statuses).items():
        outcomes[graph_model.gate_id(gate)] = Outcome(taken)
    return legend(statuses=True) + f'<div class="card">{_graph_svg(spec, outcomes)}</div>'


def _graph_svg(spec: PipelineSpec, outcomes: dict[str, Outcome]) -> str:
    return render_svg(graph_model.build(spec), outcomes)


def _timeline(receipt: dict[str, Any], state_dir: Path) -> str:
    steps = receipt.get("steps", [])
    times = [float(a[k]) for s in steps for a in s.get("attempts", []) for k in ("started", "ended") if a.get(k)]
    t0 = min([float(receipt.get("started") or 0) or min(times, default=0.0), *times])
    t1 = max([float(receipt.get("ended") or 0), *times, t0 + 1e-3])
    state = RunState(state_dir, str(receipt.get("run_id", "")))
    # A cached step's fragment (when it has one) says when the cache served it: one listing.
    served = state.fragments(s["node"] for s in steps if s.get("cached"))
    rows = []
    for s in steps:
        at = None
        if s.get("cached"):
            frag = served.get(s["node"])
            at = frag.started if frag else None
        cost = s.get("estimated_cost_usd")
        note = _dur(s.get("duration_s")) if s.get("attempts") else ""
        if cost:
            note += f"  {_usd(cost)}"
        rows.append(Row(s["node"], str(s.get("status")), s.get("attempts") or [], at, note))
    return f'<div class="card">{timeline(rows, t0, t1)}</div>'


def _curves(found: list[Curve], singles: list[MetricPoint]) -> str:
    charts = []
    for c in found:
        series = [Series(f"attempt {a}", tuple(pts)) for a, pts in c.by_attempt.items()]
        charts.append(line_chart(f"{c.node} \u00b7 {c.name}", series, key=f"{c.node}/{c.name}"))
    out = f'<div class="charts">{"".join(charts)}</div>' if charts else ""
    if singles:
        rows = [(f"{p.node} \u00b7 {p.name}", _code(round(p.value, 6))) for p in singles]
        out += "<h3>Logged values</h3>" + _facts_table(rows)
    return out or '<p class="sub">No step logged metrics (ctx.log_metric(name, value, step=...)).</p>'


def _pct(eff: dict[str, Any] | None) -> str:
    return f"{eff['ratio'] * 100:.0f}% ({eff['verdict']})" if eff else "-"


def _secs(value: Any) -> str:
    return esc(_dur(value)) if value else "-"


def _cost_table(receipt: dict[str, Any]) -> str:
    head = ("<tr><th>step</th><th>status</th><th>attempts</th><th>time</th><th>data wait</th><th>checkpoints</th>"
            "<th>GPU</th><th>GPU-seconds</th><th>GPU efficiency</th><th>cost</th></tr>")
    rows = []
    for s in receipt.get("steps", []):
        gpus = s.get("gpus") or {}
        dev = gpus.get("device") or {}
        on = f" ({dev['type']})" if dev.get("type") else ""
        gpu = f"{gpus.get('requested', 0)} requested, {gpus.get('billed', 0)} billed{on}" if gpus else "-"
        used = s.get("usage") or {}
        rows.append(
            f"<tr><td>{esc(s['node'])}</td><td>{_pill(str(s.get('status')))}</td><td>{len(s.get('attempts') or [])}</td>"
            f"<td>{esc(_dur(s.get('duration_s')))}</td><td>{_secs(used.get('data_wait_s'))}</td>"
            f"<td>{_secs(used.get('checkpoint_s'))}</td><td>{esc(gpu)}</td>"
            f"<td>{esc(s.get('gpu_seconds', '-'))}</td><td>{esc(_pct(s.get('gpu_efficiency')))}</td>"
            f"<td>{_usd(s.get('estimated_cost_usd'))}</td></tr>")
    totals = receipt.get("totals") or {}
    rows.append(f"<tr><th>total</th><td></td><td></td><td></td><th>{_secs(totals.get('data_wait_s'))}</th>"
                f"<th>{_secs(totals.get('checkpoint_s'))}</th><td></td><th>{esc(totals.get('gpu_seconds', '-'))}</th>"
                f"<th>{esc(_pct(totals.get('gpu_efficiency')))}</th><th>{_usd(totals.get('estimated_cost_usd'))}</th></tr>")
    line = describe(totals.get("gpu_efficiency"))
    note = f'<p class="sub">{esc(line)}.</p>' if line else ""
    return f'<div class="card"><table class="facts">{head}{"".join(rows)}</table>{note}</div>'


def _snapshot(snap: dict[str, Any]) -> str:
    rest = ", ".join(f"{k} {v}" for k, v in snap.items() if k not in ("id", "node"))
    return f"{_code(snap.get('id'))} {esc(rest)}" + (f" (declared by {esc(snap['node'])})" if snap.get("node") else "")


def _facts(receipt: dict[str, Any]) -> str:
    git = receipt.get("git") or {}
    sha = git.get("sha")
    git_text = _code(sha) + (" (uncommitted changes)" if git.get("dirty") else "") if sha else "not a git checkout"
    snaps = "<br>".join(_snapshot(s) for s in receipt.get("snapshots") or []) or "none declared"
    images = sorted({s.get("digest") or s.get("image") for s in receipt.get("steps", []) if s.get("image")})
    facts = [(s["node"], _code(s["facts"])) for s in receipt.get("steps", []) if s.get("facts")]
    rows = [
        ("git", git_text),
        ("data snapshots", snaps),
        ("images", "<br>".join(_code(i) for i in images) or "local process (no image)"),
        ("parameters", "<br>".join(f"{_code(k)} = {_code(v)}" for k, v in (receipt.get("parameters") or {}).items())),
        ("cache hits", ", ".join(esc(n) for n in receipt.get("cache_hits") or []) or "none"),
        *facts,
    ]
    return f'<div class="card">{_facts_table(rows)}</div>'


def _outcome(receipt: dict[str, Any]) -> str:
    """What the run decided (each il.when gate) and returned (the pipeline's outputs)."""
    gates = receipt.get("gates") or []
    outputs = receipt.get("outputs") or {}
    if not gates and not outputs:
        return ""
    rows = [(f"gate {g.get('id')}", f"{_code(g.get('condition'))}: <b>{'held' if g.get('held') else 'did not hold'}</b>")
            for g in gates]
    rows += [(f"output {name}", _code(value)) for name, value in outputs.items()]
    return "<h2>Outcome</h2>" + f'<div class="card">{_facts_table(rows)}</div>'


def _triggered(receipt: dict[str, Any]) -> str:
    """Why the run started (``interlock watch``'s trigger), with the drift figures per feature."""
    cause = receipt.get("triggered_by")
    if not isinstance(cause, dict):
        return ""
    rows = [("trigger", f"{esc(cause.get('trigger'))} ({esc(cause.get('kind'))})"), ("time", esc(cause.get("time")))]
    if cause.get("uri"):
        rows.append(("data", _code(cause["uri"])))
    figures = cause.get("figures") or {}
    for feature, stats in figures.items():
        if isinstance(stats, dict):
            rows.append((f"drift {feature}", esc(", ".join(f"{k} {v:.4g}" if isinstance(v, int | float) else f"{k} {v}"
                                                            for k, v in stats.items()))))
    return "<h2>Triggered by</h2>" + f'<div class="card">{_facts_table(rows)}</div>'


def report_html(state_dir: Path, spec: PipelineSpec | None = None) -> str:
    state_dir = Path(state_dir)
    spec = spec or load_spec(state_dir)
    receipt, final = read_receipt(state_dir, spec)
    found, singles, progress = curves(state_dir)  # read once: the graph's notes and the charts
    status = str(receipt.get("status", "?"))
    started, ended = receipt.get("started"), receipt.get("ended")
    took = format_duration(round(float(ended) - float(started), 3)) if started and ended else "?"
    sub = (f"run <code>{esc(receipt.get('run_id'))}</code> on <b>{esc(receipt.get('backend'))}</b>, "
           f"started {_when(started)}, {'took' if final else 'running for'} {esc(took)}, "
           f"estimated cost {_usd((receipt.get('totals') or {}).get('estimated_cost_usd'))}")
    body = (
        f"<h1>{esc(receipt.get('pipeline'))} {_pill(status)}</h1><p class=\"sub\">{sub}</p>"
        + ("" if final else '<p class="sub">No receipt yet: drawn from the step fragments written so far.</p>')
        + _failure_box(receipt)
        + _triggered(receipt)
        + _outcome(receipt)
        + "<h2>Graph</h2>" + _graph(spec, receipt, progress)
        + "<h2>Timeline</h2>" + _timeline(receipt, state_dir)
        + "<h2>Training curves</h2>" + _curves(found, singles)
        + "<h2>Cost</h2>" + _cost_table(receipt)
        + "<h2>Receipt</h2>" + _facts(receipt)
        + '<p class="sub">The whole receipt: <a href="receipt.json">receipt.json</a> (next to this page).</p>'
    )
    return page(f"{receipt.get('pipeline')} run {receipt.get('run_id')}: {status}", body)


def write_report(state_dir: Path, spec: PipelineSpec | None = None, out: Path | None = None) -> Path:
    """Write the run's report (default ``<state>/report.html``, next to receipt.json)."""
    path = Path(out) if out else Path(state_dir) / REPORT_FILE
    write_text_atomic(path, report_html(state_dir, spec))  # its folder made only when missing
    return path


def write_report_quietly(state_dir: Path, spec: PipelineSpec | None = None) -> Path | None:
    """The end-of-run report: a picture must never fail a run that finished, so a problem is
    a warning (the receipt is already written)."""
    try:
        return write_report(state_dir, spec)
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("interlock: could not write the run report in %s: %s", state_dir, exc)
        return None


def show(run_id: str, workdir: Path, out: Path | None = None) -> Path:
    """``interlock show RUN_ID``: (re)write the run's report and return its path."""
    return write_report(find_run(run_id, workdir), out=out)
