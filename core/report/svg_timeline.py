"""A run's timeline as inline SVG: one row per step, one bar per attempt (coloured by how it
ended, labelled with its failure kind), the wait before a retry (a backoff for CONTENTION)
as a hatched gap, a cache hit as a marker, skipped and never-run steps named in their row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from interlock.core.base.durations import format_duration
from interlock.core.report.svg import FONT, el, esc, fit, num
from interlock.core.report.svg_chart import nice_ticks
from interlock.core.report.svg_graph import STATUS_COLOURS

ROW_H = 26.0
LABEL_W = 170.0
NOTE_W = 150.0


@dataclass(frozen=True)
class Row:
    node: str
    status: str
    attempts: Sequence[dict[str, Any]] = ()  # receipt attempts: started, ended, status, failure, delay_s
    at: float | None = None  # a cache hit or a step with no attempts: when it was recorded
    note: str = ""  # right-hand column: duration, cost
    extra: dict[str, Any] = field(default_factory=dict)


def _wait_label(prev: dict[str, Any], gap: float) -> str:
    kind = (prev.get("failure") or {}).get("kind", "")
    if prev.get("delay_s"):
        return f"backoff {format_duration(prev['delay_s'])}" + (f" ({kind})" if kind else "")
    return f"wait {format_duration(round(gap, 3))}"


def timeline(rows: Sequence[Row], t0: float, t1: float, *, width: float = 900) -> str:
    span = max(t1 - t0, 1e-3)
    plot_w = width - LABEL_W - NOTE_W - 20
    ticks = [t for t in nice_ticks(0.0, span, 6) if t <= span * 1.0001]

    def px(t: float) -> float:
        return LABEL_W + (t - t0) / span * plot_w

    height = 30 + ROW_H * len(rows) + 10
    parts = [el("defs", el("pattern", el("path", d="M0,6 L6,0", stroke="#b0bec5", stroke_width="1.5"),
                           id="hatch", width="6", height="6", patternUnits="userSpaceOnUse"))]
    for t in ticks:
        x = LABEL_W + t / span * plot_w
        parts.append(el("line", x1=num(x), x2=num(x), y1="22", y2=num(height - 8), stroke="#eceff1"))
        parts.append(el("text", esc(format_duration(round(t, 3))), x=num(x), y="14", text_anchor="middle",
                        font_size="10", fill="#78909c"))
    for i, row in enumerate(rows):
        if not row.attempts and not (row.status == "cached" and row.at):
            # No bar, no marker: the row says why the step has none.
            parts.append(_still_row(i, row.node, row.status, row.note, width))
            continue
        body, y, mid, colour = _row_head(i, row.node, row.status)
        if not row.attempts:  # a cache hit, marked at its time
            x = px(row.at)  # type: ignore[arg-type]  # a cached row with a time, from the test above
            body += el("path", d=f"M{num(x)},{num(mid - 7)} l7,7 l-7,7 l-7,-7 z", fill=colour, class_="cache-hit")
            body += el("text", "cache hit", x=num(x + 10), y=num(mid + 4), font_size="11", fill=colour)
            parts.append(_row_group(row.node, row.status, body + _row_note(row.note, mid, width)))
            continue
        prev: dict[str, Any] | None = None
        for a in sorted(row.attempts, key=lambda a: float(a.get("started", 0.0))):
            s, e = float(a.get("started", t0)), float(a.get("ended") or 0.0)
            if e < s:  # no end recorded: still running, or killed; drawn up to the report's end
                e = t1
            # A killed attempt records no end: no wait is drawn after it (it is drawn to the next start).
            if prev is not None and prev.get("ended") and s - float(prev["ended"]) > span * 0.004:
                gx, gw = px(float(prev["ended"])), px(s) - px(float(prev["ended"]))
                body += el("rect", x=num(gx), y=num(y + 7), width=num(gw), height=num(ROW_H - 14),
                           fill="url(#hatch)", stroke="#b0bec5", class_="wait")
                label = _wait_label(prev, s - float(prev["ended"]))
                if gw > 60:
                    body += el("text", esc(fit(label, 10, gw - 6)), x=num(gx + gw / 2), y=num(mid + 3),
                               text_anchor="middle", font_size="10", fill="#546e7a")
            status, number = a.get("status"), a.get("number")
            fill, stroke = STATUS_COLOURS.get(str(status), ("#eceff1", "#546e7a"))
            bx, bw = px(s), max(px(e) - px(s), 3.0)
            kind = (a.get("failure") or {}).get("kind")
            tip = f"{row.node} attempt {number}: {status} in {format_duration(round(e - s, 3))}"
            if a.get("failure"):
                tip += f"\n{kind}: {a['failure'].get('reason', '')}"
            if a.get("decision"):
                tip += f"\n{a['decision']}"
            body += el("rect", el("title", esc(tip)), x=num(bx), y=num(y + 4), width=num(bw), height=num(ROW_H - 8),
                       rx="3", fill=fill, stroke=stroke, class_=f"attempt attempt-{status}", data_attempt=number)
            label = f"#{number}" + (f" {kind}" if kind else "")
            if bw > 28:
                body += el("text", esc(fit(label, 10, bw - 6)), x=num(bx + 4), y=num(mid + 3), font_size="10",
                           fill=stroke)
            prev = a
        body += _row_note(row.note, mid, width)
        parts.append(_row_group(row.node, row.status, body))
    w, h = num(width), num(height)
    return el("svg", "".join(parts), xmlns="http://www.w3.org/2000/svg", class_="timeline", width=w, height=h,
              viewBox=f"0 0 {w} {h}", role="img", aria_label="timeline", style=FONT)


def _still_row(i: int, node: str, status: str, note: str, width: float) -> str:
    """The row of a step without attempts or a cache-hit time (skipped, not run, cached with
    no record of when)."""
    body, _, mid, colour = _row_head(i, node, status)
    words = {"skipped": "skipped: its gate was false", "not-run": "not run: an earlier failure stopped the run",
             "cached": "cache hit"}.get(status, status)
    body += el("text", esc(words), x=num(LABEL_W + 4), y=num(mid + 4), font_size="11", fill=colour,
               font_style="italic")
    body += _row_note(note, mid, width)
    return _row_group(node, status, body)


def _row_group(node: str, status: str, body: str) -> str:
    """A row's ``<g>``: what a test (or the browser's inspector) finds a step's row by."""
    return el("g", body, class_="row", data_node=node, data_status=status)


def _row_head(i: int, node: str, status: str) -> tuple[str, float, float, str]:
    """Row ``i``'s name and status dot; with its top, its middle and its status colour."""
    y = 26 + ROW_H * i
    mid = y + ROW_H / 2
    colour = STATUS_COLOURS.get(status, ("#fff", "#546e7a"))[1]
    body = el("text", esc(fit(node, 12, LABEL_W - 16)), x="4", y=num(mid + 4), font_size="12",
              fill="#263238", font_weight="600")
    body += el("circle", cx=num(LABEL_W - 8), cy=num(mid), r="4", fill=colour)
    return body, y, mid, colour


def _row_note(note: str, mid: float, width: float) -> str:
    """A row's note (its duration, its cost) at the right edge; nothing without one."""
    if not note:
        return ""
    return el("text", esc(note), x=num(width - 8), y=num(mid + 4), text_anchor="end", font_size="11",
              fill="#546e7a")
