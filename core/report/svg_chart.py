"""Line charts as inline SVG: training curves from the points steps log per epoch.

One chart per (step, metric); one line per attempt (a retried training run that resumed from
its checkpoint shows where the second attempt picked up). Axes get "nice" ticks (1, 2, 5 x
10^k). Each line is a ``<path class="series" data-series=...>``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from interlock.core.report.svg import FONT, el, esc, num

SERIES_COLOURS = ("#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f")


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]  # (x, y), sorted by x


def nice_ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """Round tick values covering [lo, hi] (whole numbers only with ``integer``: epochs)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(count, 1)
    raw = max(raw, 1.0) if integer else raw
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw and not (integer and (m * mag) % 1))
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 12))
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.1e}"
    return f"{v:.4g}"


def line_chart(title: str, series: Sequence[Series], *, width: float = 440, height: float = 230,
               x_label: str = "step", key: str = "") -> str:
    left, right, top, bottom = 56.0, 14.0, 30.0, 38.0
    pts = [p for s in series for p in s.points if math.isfinite(p[1])]
    if not pts:
        return ""
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    xt = nice_ticks(min(xs), max(xs), 6, integer=all(float(x).is_integer() for x in xs))
    yt = nice_ticks(min(ys), max(ys))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / ((y1 - y0) or 1) * ph

    parts = [el("text", esc(title), x=num(left), y="18", font_size="13", font_weight="600", fill="#263238")]
    for t in yt:
        parts.append(el("line", x1=num(left), x2=num(left + pw), y1=num(py(t)), y2=num(py(t)), stroke="#eceff1"))
        parts.append(el("text", _fmt(t), x=num(left - 6), y=num(py(t) + 4), text_anchor="end", font_size="10",
                        fill="#78909c"))
    for t in xt:
        parts.append(el("line", x1=num(px(t)), x2=num(px(t)), y1=num(top + ph), y2=num(top + ph + 4), stroke="#90a4ae"))
        parts.append(el("text", _fmt(t), x=num(px(t)), y=num(top + ph + 16), text_anchor="middle", font_size="10",
                        fill="#78909c"))
    parts.append(el("line", x1=num(left), x2=num(left + pw), y1=num(top + ph), y2=num(top + ph), stroke="#90a4ae"))
    parts.append(el("line", x1=num(left), x2=num(left), y1=num(top), y2=num(top + ph), stroke="#90a4ae"))
    parts.append(el("text", esc(x_label), x=num(left + pw / 2), y=num(height - 6), text_anchor="middle",
                    font_size="10", fill="#78909c"))
    for i, s in enumerate(series):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        good = [(x, y) for x, y in s.points if math.isfinite(y)]
        if not good:
            continue
        d = " ".join(f"{'M' if k == 0 else 'L'}{num(px(x))},{num(py(y))}" for k, (x, y) in enumerate(good))
        title = el("title", esc(f"{s.label}: last {_fmt(good[-1][1])} at {x_label} {_fmt(good[-1][0])}"))
        parts.append(el("path", title, d=d, fill="none", stroke=colour, stroke_width="2", class_="series",
                        data_series=s.label, stroke_linejoin="round"))
        if len(good) <= 40:
            for x, y in good:
                parts.append(el("circle", cx=num(px(x)), cy=num(py(y)), r="2.5", fill=colour))
        if len(series) > 1:
            lx = left + pw - 90
            parts.append(el("line", x1=num(lx), x2=num(lx + 14), y1=num(14 + 12 * i), y2=num(14 + 12 * i),
                            stroke=colour, stroke_width="2"))
            parts.append(el("text", esc(s.label), x=num(lx + 18), y=num(18 + 12 * i), font_size="10", fill="#455a64"))
    w, h = num(width), num(height)
    return el("svg", "".join(parts), xmlns="http://www.w3.org/2000/svg", class_="chart", width=w, height=h,
              viewBox=f"0 0 {w} {h}", data_metric=key or title, role="img", aria_label=title, style=FONT)
