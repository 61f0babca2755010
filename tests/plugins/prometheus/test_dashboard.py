"""The Grafana dashboard (docs/grafana/interlock.json): importable as is, every panel's query
accepted by a real Prometheus and answered with the series a run pushed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grafana_panels import DASHBOARD, panel_queries, render
from make_dashboard import dashboard
from metrics_demo import metered

import interlock as il

NEEDS_NVML = {"GPU utilization by step"}  # empty on a host without a GPU


def test_the_shipped_json_is_what_the_generator_writes_and_grafana_can_import() -> None:
    shipped = json.loads(DASHBOARD.read_text())
    assert shipped == dashboard(), "run python docs/grafana/make_dashboard.py"
    assert [i["name"] for i in shipped["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [p["id"] for p in shipped["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in shipped["panels"]:
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}" and p["targets"]
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"panel {p['title']!r} overlaps another"
        cells |= mine
    assert {v["name"] for v in shipped["templating"]["list"]} == {"pipeline", "team"}


def test_every_panel_query_answers_from_a_real_run(prometheus, tmp_path: Path) -> None:
    result = il.run(metered, "local", workdir=tmp_path, progress=False, pushgateway=prometheus.gateway)
    prometheus.wait_for(f'interlock_run_end_timestamp_seconds{{run_id="{result.run_id}"}}')
    shipped = json.loads(DASHBOARD.read_text())
    # Only this run's team, so that the answer is this run's even with other runs pushed.
    for panel, exprs in panel_queries(shipped, pipeline="metered", team="fraud"):
        for expr in exprs:
            found = prometheus.query(expr)  # a query Prometheus refuses raises
            if panel["title"] in NEEDS_NVML:
                assert found == []
            else:
                assert found, f"panel {panel['title']!r}: no series for {expr}"
    retries = next(e for p, e in panel_queries(shipped, pipeline="metered") if p["title"] == "Retries by failure kind")
    assert {s["metric"]["kind"] for s in prometheus.query(retries[0])} == {"transient"}  # not "none"


def test_the_panels_draw_from_prometheus(prometheus, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    il.run(metered, "local", workdir=tmp_path, progress=False, pushgateway=prometheus.gateway)
    prometheus.wait_for('interlock_run_gpu_efficiency_ratio{pipeline="metered"}')
    import time

    out = render(prometheus, tmp_path / "panels.png", time.time() - 60, time.time())
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
