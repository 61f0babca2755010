"""`interlock graph FILE --html OUT`: the pipeline graph as a self-contained page (inline SVG,
no script, no network), with its policies as badges; cache is labelled "cache enabled"."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from core_pipelines import pictured

from interlock.core.cli.main import main
from interlock.core.report import render
from interlock.core.report.graph_layout import layout
from interlock.core.report.graph_model import EdgeKind, NodeKind, build
from interlock.core.report.html_page import graph_page

FILE = str(Path(pictured.__file__).resolve())
SPEC = pictured.pictured.spec


def _node_kinds(html: str) -> dict[str, str]:
    return dict(re.findall(r'class="node" data-node="([^"]+)" data-kind="([^"]+)"', html))


def test_the_model_has_every_construct_and_policy() -> None:
    g = build(SPEC)
    kinds = {n.id: n.kind for n in g.nodes}
    assert kinds["square"] is NodeKind.MAP and kinds["cleanup"] is NodeKind.FINALLY
    assert [n.title for n in g.nodes if n.kind is NodeKind.GATE] == ["when train.o0 > 100.0", "elif train.o0 > 5.0",
                                                                      "otherwise"]
    badges = {b.text for b in g.node("train").badges}
    assert badges == {"GPU 2x nvidia-h200", "spot", "retry transient 2", "contention 3, backoff from 5m", "preempted 3",
                      "checkpoint every 30m", "timeout 2h"}
    assert [b.text for b in g.node("load").badges] == ["cache enabled v3"]
    assert g.node("uncached").badges == ()  # Cache(enabled=False) is no cache
    assert "map x over load.o0 (2 at once)" in g.node("square").lines
    edges = {(e.src, e.dst, e.kind, e.label) for e in g.edges}
    assert ("load", "train", EdgeKind.DATA, "xs") in edges
    assert ("train", "gate:gate-1", EdgeKind.CONDITION, "o0") in edges
    assert ("gate:gate-1", "gate:gate-2", EdgeKind.CONDITION, "else") in edges
    assert ("gate:gate-2", "medium", EdgeKind.CONDITION, "then") in edges
    assert not any(e.dst == "gate:gate-2" and e.src == "train" for e in g.edges)  # drawn once, on the chain's head
    # the finally step hangs off every step that nothing else follows
    assert {e.src for e in g.edges if e.dst == "cleanup"} == {"uncached", "total", "big", "medium", "small"}


def test_the_page_is_self_contained_and_draws_every_node() -> None:
    html = graph_page(SPEC)
    assert html.startswith("<!DOCTYPE html>")
    kinds = _node_kinds(html)
    assert kinds == {"load": "step", "uncached": "step", "train": "step", "square": "map", "total": "step",
                     "big": "step", "medium": "step", "small": "step", "cleanup": "finally",
                     "gate:gate-1": "gate", "gate:gate-2": "gate", "gate:gate-3": "gate"}
    assert "cache enabled v3" in html and not re.search(r"\bcached\b", html)
    assert "<script" not in html and "<link" not in html and " src=" not in html
    assert not re.search(r'(href|src)="(https?:)?//', html)
    assert html.count('class="edge') == len(build(SPEC).edges)


def test_text_mermaid_and_dot_say_cache_enabled() -> None:
    for out in (render.text(SPEC), render.mermaid(SPEC), render.dot(SPEC)):
        assert "load [cache enabled]" in out and not re.search(r"\bcached\b", out)
        assert "uncached [" not in out  # a disabled cache gets no label


def test_graph_html_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pics" / "graph.html"
    assert main(["graph", FILE, "--html", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert _node_kinds(out.read_text())["square"] == "map"
    assert main(["graph", f"{FILE}:pictured", "--format", "html"]) == 0
    assert capsys.readouterr().out.startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("seed", range(5))
def test_layout_keeps_boxes_apart_and_edges_downwards(seed: int) -> None:
    rng = random.Random(seed)
    ids = [f"n{i}" for i in range(25)]
    sizes = {i: (rng.uniform(80, 260), rng.uniform(30, 90)) for i in ids}
    edges = [(ids[a], ids[b]) for a in range(25) for b in range(a + 1, 25) if rng.random() < 0.1]
    lay = layout(sizes, edges)
    boxes = list(lay.boxes.values())
    for a in boxes:
        assert a.x - a.w / 2 >= 0 and a.y >= 0 and a.x + a.w / 2 <= lay.width and a.y + a.h <= lay.height
        for b in boxes:
            if a is not b and a.layer == b.layer:
                assert abs(a.x - b.x) >= (a.w + b.w) / 2, (a, b)  # no overlap in a layer
    for src, dst, points in lay.routes:
        assert lay.boxes[src].layer < lay.boxes[dst].layer
        assert all(p[1] < q[1] for p, q in zip(points, points[1:], strict=False)), (src, dst, points)
    assert len(lay.routes) == len(set(edges))


def test_layout_of_a_cycle_keeps_every_box() -> None:
    # Specs are acyclic, but the drawing must not lose a box if handed a cycle: the boxes
    # of the cycle come after the rest, and its closing edge is dropped, not drawn upwards.
    sizes = {n: (100.0, 40.0) for n in ("a", "b", "c", "d")}
    lay = layout(sizes, [("a", "b"), ("b", "c"), ("c", "b"), ("c", "d")])
    assert set(lay.boxes) == {"a", "b", "c", "d"}
    for src, dst, _ in lay.routes:
        assert lay.boxes[src].layer < lay.boxes[dst].layer, (src, dst)
