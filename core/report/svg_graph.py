"""The pipeline graph as inline SVG: boxes with policy badges, gates as hexagons, maps as
stacked boxes, the finally step with a double border; coloured by outcome in a run report.

Every node is a ``<g class="node" data-node=NAME data-kind=KIND [data-status=STATUS]>`` so a
test (or a person with the browser's inspector) can find it.
"""

from __future__ import annotations

from dataclasses import dataclass

from interlock.core.report.graph_layout import Layout, layout
from interlock.core.report.graph_model import (
    Badge,
    DisplayEdge,
    DisplayGraph,
    DisplayNode,
    EdgeKind,
    NodeKind,
)
from interlock.core.report.svg import FONT, clip, el, esc, fit, num, text_width

PAD = 10.0
TITLE_H = 18.0
LINE_H = 15.0
BADGE_H = 18.0
MAX_W = 300.0
MIN_W = 120.0

# status -> (fill, stroke); also used by the timeline and the legend (report_html.py).
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    "succeeded": ("#e6f4ea", "#2e7d32"),
    "failed": ("#fdecea", "#c62828"),
    "cached": ("#e3f0fc", "#1565c0"),
    "skipped": ("#f3f3f3", "#9e9e9e"),
    "not-run": ("#fafafa", "#bdbdbd"),
    "stopped": ("#fff3e0", "#ef6c00"),
    "killed": ("#f3e5f5", "#6a1b9a"),
    "running": ("#fffde7", "#f9a825"),
    "taken": ("#fff8e1", "#b7791f"),
    "not-taken": ("#f3f3f3", "#9e9e9e"),
}
PLAIN = ("#ffffff", "#546e7a")
GATE = ("#fff8e1", "#b7791f")
BADGE_COLOURS: dict[str, tuple[str, str]] = {
    "gpu": ("#ede7f6", "#4527a0"),
    "distributed": ("#ede7f6", "#4527a0"),
    "spot": ("#fff3e0", "#e65100"),
    "cache": ("#e3f2fd", "#0d47a1"),
    "retry": ("#fce4ec", "#ad1457"),
    "checkpoint": ("#e0f2f1", "#00695c"),
    "timeout": ("#eceff1", "#37474f"),
}
EDGE_STYLE = {
    EdgeKind.DATA: ("#78909c", None),
    EdgeKind.CONDITION: ("#b7791f", "5 4"),
    EdgeKind.ORDER: ("#9e9e9e", "2 4"),
}


@dataclass(frozen=True)
class Outcome:
    """What happened to a node in a run: a Status value (``taken``/``not-taken`` for a gate)."""

    status: str
    note: str = ""  # "2 attempts, 1.3s", "cache hit", "3 items"


def _badge_rows(badges: tuple[Badge, ...], width: float) -> list[list[Badge]]:
    rows: list[list[Badge]] = [[]]
    used = 0.0
    for b in badges:
        w = text_width(b.text, 10.5) + 12
        if rows[-1] and used + w > width:
            rows.append([])
            used = 0.0
        rows[-1].append(b)
        used += w + 4
    return [r for r in rows if r]


def _size(n: DisplayNode, outcome: Outcome | None) -> tuple[float, float]:
    if n.kind is NodeKind.GATE:
        h = 40.0
        return min(max(text_width(n.title, 12) + h + 10, 90.0), MAX_W + 60), h
    lines = list(n.lines) + ([f"{outcome.status} \u00b7 {outcome.note}"] if outcome else [])
    widths = [text_width(n.title, 13.5) + 4, *(text_width(s, 11) for s in n.lines)]
    widths += [text_width(s, 12) for s in lines[len(n.lines):]]  # the outcome line is bold
    widths += [sum(text_width(b.text, 10.5) + 16 for b in n.badges[:2])]
    widths += [text_width(b.text, 10.5) + 14 for b in n.badges]  # the widest badge fits whole
    w = min(max(max(widths) + 2 * PAD, MIN_W), MAX_W)
    rows = _badge_rows(n.badges, w - 2 * PAD)
    h = PAD + TITLE_H + LINE_H * len(lines) + (BADGE_H + 4) * len(rows) + PAD - (4 if rows else 0)
    return w, h


def render_svg(graph: DisplayGraph, outcomes: dict[str, Outcome] | None = None) -> str:
    """The whole graph as one ``<svg>`` element (no external references)."""
    outcomes = outcomes or {}
    sizes = {n.id: _size(n, outcomes.get(n.id)) for n in graph.nodes}
    lay = layout(sizes, [(e.src, e.dst) for e in graph.edges])
    parts = [_defs()]
    kinds = {(e.src, e.dst): e for e in graph.edges}
    for src, dst, points in lay.routes:
        parts.append(_edge(kinds[(src, dst)], points))
    for n in graph.nodes:
        parts.append(_node(n, lay, outcomes.get(n.id)))
    w, h = num(max(lay.width, 200)), num(lay.height)
    return el(
        "svg", "".join(parts), xmlns="http://www.w3.org/2000/svg", class_="graph", width=w, height=h,
        viewBox=f"0 0 {w} {h}", role="img", aria_label=f"pipeline {graph.name}", style=FONT,
    )


def _defs() -> str:
    markers = "".join(
        el("marker", el("path", d="M0,0 L8,4 L0,8 z", fill=colour), id=f"arrow-{kind.value}", viewBox="0 0 8 8",
           refX="7", refY="4", markerWidth="8", markerHeight="8", orient="auto")
        for kind, (colour, _) in EDGE_STYLE.items()
    )
    return el("defs", markers)


def _edge(edge: DisplayEdge, points: list[tuple[float, float]]) -> str:
    colour, dash = EDGE_STYLE[edge.kind]
    d = f"M{num(points[0][0])},{num(points[0][1])}"
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        dy = (y1 - y0) / 2
        d += f" C{num(x0)},{num(y0 + dy)} {num(x1)},{num(y1 - dy)} {num(x1)},{num(y1)}"
    out = el("path", d=d, fill="none", stroke=colour, stroke_width="1.4", stroke_dasharray=dash,
             marker_end=f"url(#arrow-{edge.kind.value})")
    if edge.label:
        (x0, y0), (x1, y1) = points[len(points) // 2 - 1] if len(points) > 2 else points[0], points[len(points) // 2]
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        label = clip(edge.label, 28)
        tw = text_width(label, 10)
        out += el("rect", x=num(mx - tw / 2 - 3), y=num(my - 7), width=num(tw + 6), height="13", rx="3",
                  fill="#ffffff", opacity="0.85")
        out += el("text", esc(label), x=num(mx), y=num(my + 3), text_anchor="middle", font_size="10", fill=colour)
    return el("g", out, class_=f"edge edge-{edge.kind.value}", data_src=edge.src, data_dst=edge.dst)


def _node(n: DisplayNode, lay: Layout, outcome: Outcome | None) -> str:
    box = lay.boxes[n.id]
    x0, y0, w, h = box.x - box.w / 2, box.y, box.w, box.h
    fill, stroke = STATUS_COLOURS.get(outcome.status, PLAIN) if outcome else (GATE if n.kind is NodeKind.GATE else PLAIN)
    dash = "4 3" if outcome and outcome.status in ("skipped", "not-run", "not-taken") else None
    body = el("title", esc("\n".join(t for t in (n.title, n.tip, outcome.status if outcome else "") if t)))
    if n.kind is NodeKind.GATE:
        k = h / 2
        pts = [(x0, y0 + k), (x0 + k, y0), (x0 + w - k, y0), (x0 + w, y0 + k), (x0 + w - k, y0 + h), (x0 + k, y0 + h)]
        body += el("polygon", points=" ".join(f"{num(a)},{num(b)}" for a, b in pts), fill=fill, stroke=stroke,
                   stroke_width="1.5", stroke_dasharray=dash, class_="box")
        body += el("text", esc(fit(n.title, 12, w - h)), x=num(box.x), y=num(y0 + k + 4),
                   text_anchor="middle", font_size="12", fill="#5d4037")
        return _node_group(n, outcome, body)
    if n.kind is NodeKind.MAP:  # a stack: the same step, once per item
        for off in (8, 4):
            body += el("rect", x=num(x0 + off), y=num(y0 - off), width=num(w), height=num(h), rx="6",
                       fill=fill, stroke=stroke, stroke_width="1", opacity="0.7")
    body += el("rect", x=num(x0), y=num(y0), width=num(w), height=num(h), rx="6", fill=fill, stroke=stroke,
               stroke_width="1.6", stroke_dasharray=dash, class_="box")
    if n.kind is NodeKind.FINALLY:
        body += el("rect", x=num(x0 + 3), y=num(y0 + 3), width=num(w - 6), height=num(h - 6), rx="4", fill="none",
                   stroke=stroke, stroke_width="0.8")
    room, left = w - 2 * PAD, num(x0 + PAD)
    y = y0 + PAD + 13
    body += el("text", esc(fit(n.title, 13.5, room)), x=left, y=num(y), font_size="13", font_weight="600",
               fill="#263238")
    y += TITLE_H - 13
    for line in n.lines:
        y += LINE_H
        body += el("text", esc(fit(line, 11, room)), x=left, y=num(y - 3), font_size="11", fill="#546e7a")
    if outcome:  # the outcome in its colour, then what it took
        y += LINE_H
        text = outcome.status + (f" \u00b7 {outcome.note}" if outcome.note else "")
        body += el("text", esc(fit(text, 11, room)), x=left, y=num(y - 3), font_size="11", fill=stroke,
                   font_weight="600", class_="status")
    y += 4
    for row in _badge_rows(n.badges, room):
        x = x0 + PAD
        for b in row:
            full = text_width(b.text, 10.5) + 12
            bw = min(full, room)
            label = fit(b.text, 10.5, bw - 12)
            bg, fg = BADGE_COLOURS.get(b.tone, ("#eceff1", "#37474f"))
            body += el("rect", x=num(x), y=num(y), width=num(bw), height=BADGE_H, rx="9", fill=bg,
                       class_=f"badge badge-{b.tone}")
            body += el("text", esc(label), x=num(x + 6), y=num(y + 13), font_size="10.5", fill=fg)
            x += bw + 4
        y += BADGE_H + 4
    return _node_group(n, outcome, body)


def _node_group(n: DisplayNode, outcome: Outcome | None, body: str) -> str:
    """A node's ``<g>``: what a test (or the browser's inspector) finds a node by."""
    return el("g", body, class_="node", data_node=n.id, data_kind=n.kind.value,
              data_status=outcome.status if outcome else None)
