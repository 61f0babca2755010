"""The pictures in a real headless browser (Chromium; Firefox for screenshots): the graph page
and a run report render every step with its status, the curves as drawn lines, the timeline's
attempts, no label spilling out of its box, no console errors; screenshots are real PNGs."""

from __future__ import annotations

from pathlib import Path

import browser
import pytest
from core_pipelines import pictured, reported

import interlock as il
from interlock.core.report.html_page import graph_page

FOUND = browser.find()
pytestmark = pytest.mark.skipif(FOUND is None, reason=browser.MISSING)


def _chromium() -> str:
    assert FOUND is not None
    if FOUND[0] != "chromium":
        pytest.skip("only Firefox here: it takes screenshots but cannot dump the rendered DOM; install chromium")
    return FOUND[1]


def test_the_graph_page_renders_every_node_and_fits_its_labels(tmp_path: Path) -> None:
    page = tmp_path / "graph.html"
    page.write_text(graph_page(pictured.pictured.spec))
    data, console = browser.probe(_chromium(), page)
    assert set(data["nodes"]) == {"load", "uncached", "train", "square", "total", "big", "medium", "small", "cleanup",
                                  "gate:gate-1", "gate:gate-2", "gate:gate-3"}
    assert all(n["w"] > 50 and n["h"] > 20 for n in data["nodes"].values()), data["nodes"]
    assert data["overflow"] == [] and data["errors"] == [] and console == ""


def test_a_run_report_renders_statuses_timeline_and_curves(tmp_path: Path) -> None:
    r = il.run(reported.reported, workdir=tmp_path, run_id="seen")
    page = Path(r.receipt_path).with_name("report.html")
    data, console = browser.probe(_chromium(), page)
    assert {k: v["status"] for k, v in data["nodes"].items()} == {
        "ingest": "succeeded", "flaky": "succeeded", "train": "succeeded", "promote": "skipped",
        "gate:gate-1": "not-taken"}
    assert {r["node"]: (r["status"], r["bars"]) for r in data["rows"]} == {
        "ingest": ("succeeded", 1), "flaky": ("succeeded", 2), "train": ("succeeded", 2), "promote": ("skipped", 0)}
    assert sorted(s["metric"] for s in data["series"]) == ["train/loss", "train/lr"]
    assert all(s["length"] > 50 for s in data["series"]), data["series"]  # drawn lines, not empty paths
    assert data["overflow"] == [] and data["errors"] == [] and console == ""
    assert data["width"] <= 1400  # no runaway horizontal scrolling


@pytest.mark.parametrize("which", ["graph", "report"])
def test_screenshots_are_real_pngs(tmp_path: Path, which: str) -> None:
    assert FOUND is not None
    if which == "graph":
        page = tmp_path / "graph.html"
        page.write_text(graph_page(pictured.pictured.spec))
    else:
        page = Path(il.run(reported.reported, workdir=tmp_path).receipt_path).with_name("report.html")
    png = browser.screenshot(*FOUND, page, tmp_path / f"{which}.png", size=(1000, 1400))
    assert browser.png_size(png) == (1000, 1400)
    assert png.stat().st_size > 20_000  # a blank page compresses to a few KB
