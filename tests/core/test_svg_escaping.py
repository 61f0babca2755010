"""Every name and text in the pictures (a node, an edge, a timeline row) is escaped: the SVG
parses and gives each back whole."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from interlock.core.report.graph_model import (
    Badge,
    DisplayEdge,
    DisplayGraph,
    DisplayNode,
    EdgeKind,
    NodeKind,
)
from interlock.core.report.svg_graph import Outcome, render_svg
from interlock.core.report.svg_timeline import Row, timeline

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = ['a"b', "x<y>&z", "it's", "plain"]


def _graph() -> DisplayGraph:
    nodes = [
        DisplayNode(name, f"title {name}", kind, lines=(f"line {name}",), badges=(Badge(f"badge {name}", tone),),
                    tip=f"tip {name}")
        for name, kind, tone in zip(HOSTILE, list(NodeKind), ["gpu", 'odd"tone', "cache", "x<y"], strict=True)
    ]
    edges = [DisplayEdge(HOSTILE[i], HOSTILE[i + 1], kind, label=f"label {HOSTILE[i]}")
             for i, kind in zip(range(3), list(EdgeKind), strict=True)]
    return DisplayGraph('pipe"line', nodes, edges)


def test_a_graph_with_markup_in_every_name_parses_and_gives_the_names_back() -> None:
    outcomes = {name: Outcome(status, note=f"note {name}")
                for name, status in zip(HOSTILE, ["succeeded", "weird<status", "skipped", "failed"], strict=True)}
    root = ET.fromstring(render_svg(_graph(), outcomes))
    nodes = {g.get("data-node"): g for g in root.iter(f"{NS}g") if g.get("class") == "node"}
    assert set(nodes) == set(HOSTILE)
    for name, g in nodes.items():
        texts = [t.text for t in g.iter(f"{NS}text")]
        drawn = [f"title {name}"] if g.get("data-kind") == "gate" else [f"title {name}", f"line {name}", f"badge {name}"]
        assert set(drawn) <= set(texts)  # a gate draws its title only
        assert g.get("data-status") == outcomes[name].status
        assert f"tip {name}" in g.find(f"{NS}title").text  # type: ignore[union-attr]
    badges = [r.get("class") for r in root.iter(f"{NS}rect") if (r.get("class") or "").startswith("badge")]
    assert 'badge badge-odd"tone' in badges and "badge badge-x<y" in badges
    edges = [(g.get("data-src"), g.get("data-dst")) for g in root.iter(f"{NS}g") if g.get("class", "").startswith("edge")]
    assert edges == [(HOSTILE[i], HOSTILE[i + 1]) for i in range(3)]
    labels = {t.text for g in root.iter(f"{NS}g") if g.get("class", "").startswith("edge") for t in g.iter(f"{NS}text")}
    assert labels == {f"label {HOSTILE[i]}" for i in range(3)}


def test_a_timeline_with_markup_in_every_name_parses_and_gives_the_names_back() -> None:
    attempts = [
        {"number": 1, "started": 1.0, "ended": 2.0, "status": "failed",
         "failure": {"kind": "TRANSIENT", "reason": "<oops> & \"quoted\""}, "decision": "retry 'now'"},
        {"number": '2"b', "started": 5.0, "ended": 9.0, "status": 'odd"status'},
    ]
    rows = [Row(name, "succeeded", attempts, note=f"1s <{name}>") for name in HOSTILE]
    root = ET.fromstring(timeline(rows, 0.0, 10.0))
    got = [g for g in root.iter(f"{NS}g") if g.get("class") == "row"]
    assert [g.get("data-node") for g in got] == HOSTILE
    for name, g in zip(HOSTILE, got, strict=True):
        bars = [r for r in g.iter(f"{NS}rect") if (r.get("class") or "").startswith("attempt")]
        assert [b.get("data-attempt") for b in bars] == ["1", '2"b']
        assert bars[1].get("class") == 'attempt attempt-odd"status'
        tip = bars[0].find(f"{NS}title").text  # type: ignore[union-attr]
        assert tip.startswith(f"{name} attempt 1: failed") and '<oops> & "quoted"' in tip and "retry 'now'" in tip
        assert f"1s <{name}>" in [t.text for t in g.iter(f"{NS}text")]
