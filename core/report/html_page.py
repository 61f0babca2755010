"""Self-contained HTML pages: one file, inline CSS and SVG, no script, no network.

``graph_page(spec)`` is ``interlock graph FILE --html OUT``; the run report (report_html.py)
builds on ``page`` and ``legend``.
"""

from __future__ import annotations

from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.report import graph_model
from interlock.core.report.svg import esc
from interlock.core.report.svg_graph import BADGE_COLOURS, STATUS_COLOURS, render_svg

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px 32px;
       color: #263238; background: #fafbfc; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid #e0e0e0; padding-bottom: 4px; }
.sub { color: #607d8b; margin: 0 0 12px; font-size: 13px; }
.card svg.timeline { max-width: 100%; height: auto; }  /* shrinks to the page; a wide graph scrolls */
.card { background: #fff; border: 1px solid #e3e7ea; border-radius: 8px; padding: 12px 16px; overflow-x: auto; }
.legend { display: flex; flex-wrap: wrap; gap: 8px 14px; font-size: 12px; margin: 6px 0 10px; color: #455a64; }
.legend span.sw { display: inline-block; width: 12px; height: 12px; border-radius: 3px; vertical-align: -2px;
                  margin-right: 4px; border: 1.5px solid; }
table.facts { border-collapse: collapse; font-size: 13px; }
table.facts td, table.facts th { text-align: left; padding: 3px 14px 3px 0; vertical-align: top; }
table.facts th { color: #607d8b; font-weight: 500; white-space: nowrap; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
.pill { display: inline-block; padding: 1px 9px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
.failure { background: #fdecea; border: 1px solid #f5c6c2; border-radius: 6px; padding: 8px 12px; font-size: 13px; }
footer { margin-top: 32px; color: #90a4ae; font-size: 11px; }
"""


def page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title>"
        f"<style>{CSS}</style></head><body>\n{body}\n"
        "<footer>written by interlock; a self-contained page (no scripts, no network)</footer></body></html>\n"
    )


def legend(statuses: bool) -> str:
    items = []
    if statuses:
        for name in ("succeeded", "cached", "failed", "stopped", "skipped", "not-run", "killed"):
            fill, stroke = STATUS_COLOURS[name]
            items.append(f'<span><span class="sw" style="background:{fill};border-color:{stroke}"></span>{name}</span>')
    for tone, label in (("gpu", "GPU / distributed"), ("spot", "spot (interruptible)"), ("cache", "cache enabled"),
                        ("retry", "retries"), ("checkpoint", "checkpoints"), ("timeout", "timeout")):
        bg, fg = BADGE_COLOURS[tone]
        items.append(f'<span><span class="sw" style="background:{bg};border-color:{fg}"></span>{label}</span>')
    items.append("<span>&#x2B21; gate (il.when / elif / otherwise)</span>")
    items.append("<span>stacked box: il.map</span><span>double border: il.finally_</span>")
    items.append("<span>dashed arrow: condition; dotted: ordering</span>")
    return f'<div class="legend">{"".join(items)}</div>'


def params_table(params: list[str]) -> str:
    if not params:
        return ""
    rows = "".join(f"<tr><td><code>{esc(p)}</code></td></tr>" for p in params)
    return f'<table class="facts">{rows}</table>'


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _counts(spec: PipelineSpec) -> str:
    maps = sum(1 for n in spec.nodes if n.map)
    parts = [_count(len(spec.nodes) + (1 if spec.finally_ else 0), "step"), _count(len(spec.gates), "gate")]
    return ", ".join(parts + ([_count(maps, "map")] if maps else []))


def graph_page(spec: PipelineSpec) -> str:
    """The pipeline's graph with its policies: ``interlock graph FILE --html OUT``."""
    g = graph_model.build(spec)
    body = (
        f"<h1>{esc(spec.name)}</h1>"
        + (f'<p class="sub">{esc(spec.doc.strip())}</p>' if spec.doc.strip() else "")
        + f'<p class="sub">{_counts(spec)}</p>'
        + legend(statuses=False)
        + f'<div class="card">{render_svg(g)}</div>'
        + ("<h2>Parameters</h2>" + params_table(g.params) if g.params else "")
    )
    return page(f"{spec.name}: pipeline graph", body)
