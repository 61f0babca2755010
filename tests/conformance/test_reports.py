"""The run report is written next to the receipt at the end of a run on every local backend,
and draws the same statuses the run reports, with the curve the step logged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from backends import runnable_backends

import interlock as il
from conformance import report_pipelines as rp
from interlock.core.report.report_html import show

BACKENDS = runnable_backends()


def _statuses(html: str) -> dict[str, str]:
    """data-node -> data-status of the graph's step boxes."""
    graph = html.split('class="graph"', 1)[1].split("</svg>", 1)[0]
    return dict(re.findall(r'class="node" data-node="([^"]+)" data-kind="(?:step|map|finally)" data-status="([^"]+)"', graph))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_local_backend_writes_the_report_next_to_the_receipt(tmp_path: Path, backend: str) -> None:
    result = il.run(rp.reported, backend=backend, workdir=tmp_path, n=3)
    report = Path(result.receipt_path).with_name("report.html")
    assert report.is_file(), f"{backend}: no report next to {result.receipt_path}"
    html = report.read_text()
    assert _statuses(html) == {name: str(o.status) for name, o in result.steps.items()} == {
        "load": "succeeded", "fit": "succeeded", "publish": "skipped"}
    assert 'data-status="not-taken"' in html  # the gate's block did not run
    assert 'data-metric="fit/loss"' in html and html.count('class="series"') == 1
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    # `interlock show` finds the run where every backend keeps it, and draws the same page
    report.unlink()
    assert show(result.run_id, tmp_path) == report and _statuses(report.read_text()) == _statuses(html)
