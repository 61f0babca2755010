"""Writes docs/grafana/interlock.json, the Grafana dashboard of interlock's metrics
(docs/metrics.md): ``python docs/grafana/make_dashboard.py``. The JSON is what ships; this
script is how its panels are kept consistent (one grid, one datasource input, one filter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

F = '{pipeline=~"$pipeline", team=~"$team"}'
F_STEP = '{pipeline=~"$pipeline", team=~"$team", kind!="none"}'

# (title, type, unit, queries (expr, legend), description)
PANELS: list[tuple[str, str, str, list[tuple[str, str]], str]] = [
    ("Runs by pipeline and outcome", "timeseries", "short",
     [(f"count by (pipeline, status) (interlock_run_end_timestamp_seconds{F})", "{{pipeline}} {{status}}")],
     "Runs whose metrics the Pushgateway holds, by how they ended."),
    ("Estimated cost by pipeline and team", "timeseries", "currencyUSD",
     [(f"sum by (pipeline, team) (interlock_run_estimated_cost_usd{F})", "{{pipeline}} ({{team}})")],
     "interlock's price table x what each step ran on (GPU-seconds billed from what ran, not what was asked)."),
    ("GPU efficiency ratio", "timeseries", "percentunit",
     [(f"interlock_run_gpu_efficiency_ratio{F}", "{{pipeline}} {{run_id}}")],
     "GPU-busy seconds / (wall seconds x GPUs) per run: above 85% well optimized, below 70% investigate."),
    ("Where the GPU time went", "barchart", "percentunit",
     [(f"avg by (use) (interlock_run_gpu_time_ratio{F})", "{{use}}")],
     "Share of billed GPU time: busy, data wait, checkpoint writes, idle (synchronization, launch, a slow host)."),
    ("Step durations", "timeseries", "s",
     [(f"max by (pipeline, step) (interlock_step_duration_seconds{F})", "{{pipeline}}/{{step}}")],
     "Wall time of each step over its attempts: the longest of the runs the Pushgateway holds."),
    ("GPU utilization by step", "timeseries", "percentunit",
     [(f"avg by (pipeline, step) (interlock_step_gpu_utilization_ratio{F})", "{{pipeline}}/{{step}}")],
     "Mean utilization NVML reported while the step ran (only steps that ran on a GPU)."),
    ("Data wait and checkpoint stalls", "timeseries", "s",
     [(f"avg by (pipeline, step) (interlock_step_data_wait_seconds{F})", "data wait {{step}}"),
      (f"avg by (pipeline, step) (interlock_step_checkpoint_seconds{F})", "checkpoint {{step}}")],
     "Seconds a step waited for data (ctx.waiting_for_data, ctx.timed_data) and spent writing checkpoints, "
     "averaged over the runs the Pushgateway holds."),
    ("Retries by failure kind", "barchart", "short",
     [(f"sum by (kind) (interlock_step_attempts_total{F_STEP})", "{{kind}}")],
     "Failed attempts by cause: transient and contention are retried, FATAL and OOM never (docs/failure-semantics.md)."),
]

THRESHOLDS = {"mode": "absolute", "steps": [{"color": "red", "value": None}, {"color": "orange", "value": 0.70},
                                            {"color": "green", "value": 0.85}]}


def panel(i: int, title: str, kind: str, unit: str, queries: list[tuple[str, str]], description: str) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": unit}
    if "efficiency" in title.lower():
        defaults |= {"thresholds": THRESHOLDS, "min": 0, "max": 1, "custom": {"thresholdsStyle": {"mode": "line"}}}
    return {
        "id": i + 1,
        "title": title,
        "description": description,
        "type": kind,
        "datasource": {"type": "prometheus", "uid": "${DS_PROMETHEUS}"},
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
        "targets": [{"refId": chr(65 + j), "expr": expr, "legendFormat": legend,
                     "datasource": {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}}
                    for j, (expr, legend) in enumerate(queries)],
    }


def variable(name: str, label: str) -> dict[str, Any]:
    query = f"label_values(interlock_run_end_timestamp_seconds, {name})"
    return {"name": name, "label": label, "type": "query", "query": {"query": query, "refId": name},
            "definition": query, "datasource": {"type": "prometheus", "uid": "${DS_PROMETHEUS}"},
            "includeAll": True, "allValue": ".*", "multi": True, "refresh": 2,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}}


def dashboard() -> dict[str, Any]:
    return {
        "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus",
                      "pluginName": "Prometheus"}],
        "__requires": [{"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"}],
        "uid": "interlock-pipelines",
        "title": "interlock pipelines",
        "description": "Runs, cost, step durations, GPU utilization and efficiency, stalls and retries of interlock pipelines "
                       "(metrics from interlock.plugins.prometheus; docs/metrics.md).",
        "tags": ["interlock", "ml", "gpu"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-7d", "to": "now"},
        "refresh": "1m",
        "templating": {"list": [variable("pipeline", "Pipeline"), variable("team", "Team")]},
        "panels": [panel(i, *p) for i, p in enumerate(PANELS)],
    }


if __name__ == "__main__":
    out = Path(__file__).with_name("interlock.json")
    out.write_text(json.dumps(dashboard(), indent=2) + "\n")
    print(f"wrote {out}")
