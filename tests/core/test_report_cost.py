"""The run report's graph: the graph drawn for one run is never another run's."""

from __future__ import annotations

import interlock as il
from interlock.core.dsl.pipeline import spec as spec_of
from interlock.core.report import report_html
from interlock.core.report.graph_layout import layout
from interlock.core.report.svg_graph import Outcome


@il.step
def one(x: int) -> int:
    return x + 1


@il.pipeline(name="report-cost")
def chain(x: int = 0) -> int:
    return one.named("b")(x=one.named("a")(x=x))


def test_graph_follows_each_runs_outcomes_for_the_same_spec() -> None:
    spec = spec_of(chain)
    failed = report_html._graph_svg(spec, {"a": Outcome("succeeded", "1s"), "b": Outcome("failed", "1 attempt")})
    cached = report_html._graph_svg(spec, {"a": Outcome("cached", "cache hit"), "b": Outcome("cached", "cache hit")})
    assert 'data-status="failed"' in failed and 'data-status="failed"' not in cached
    assert cached.count('data-status="cached"') == 2
    # The same outcomes again, in another order: the same picture.
    again = report_html._graph_svg(spec, {"b": Outcome("cached", "cache hit"), "a": Outcome("cached", "cache hit")})
    assert again == cached


def test_layout_layers_follow_longest_paths() -> None:
    sizes = {n: (100.0, 40.0) for n in ("a", "b", "c", "d")}
    lay = layout(sizes, [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("a", "d")])
    ys = [lay.boxes[n].y for n in ("a", "b", "c", "d")]
    assert ys == sorted(ys) and len(set(ys)) == 4  # one layer each: d after c after b after a
