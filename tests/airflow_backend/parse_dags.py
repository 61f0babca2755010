"""Load every DAG file of a folder with a real DagBag, in a fresh interpreter, and report.

    python parse_dags.py DAGS_FOLDER OUT.json

Prints nothing; writes {"errors": ..., "dags": {dag_id: {tasks}}, "modules": [...], "interlock": [...]}
where ``modules`` are the heavy or user modules that parsing imported (none may be) and
``interlock`` interlock's own (the loader and what it needs; nothing of interlock.core).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

WATCHED = ("flytekit", "flyte", "kfp", "torch", "pandas", "conformance", "airflow_test_pipelines",
           "fraud_retrain", "reference_pipelines")


def describe(task) -> dict:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    out = {"trigger_rule": getattr(task.trigger_rule, "value", task.trigger_rule), "upstream": sorted(task.upstream_task_ids),
           "retries": task.retries, "group": task.task_group.group_id if task.task_group else None,
           "mapped": isinstance(task, MappedOperator), "operator": task.operator_name}
    if task.retries:
        policy = getattr(task, "retry_policy", None)
        out["retry"] = {"retry_delay": task.retry_delay.total_seconds(),
                        "max_retry_delay": task.max_retry_delay.total_seconds() if task.max_retry_delay else None,
                        "retry_exponential_backoff": task.retry_exponential_backoff,
                        "retry_policy": type(policy).__name__ if policy is not None else None}
    if getattr(task, "execution_timeout", None) is not None:
        out["execution_timeout"] = task.execution_timeout.total_seconds()
    if task.operator_name == "KubernetesPodOperator":
        kw = task.partial_kwargs if out["mapped"] else task.__dict__
        res = kw.get("container_resources")
        out["pod"] = {
            "image": kw.get("image"), "cmds": kw.get("cmds"), "arguments": kw.get("arguments"),
            "namespace": kw.get("namespace"),
            "requests": res.requests if res is not None else None, "limits": res.limits if res is not None else None,
            "node_selector": kw.get("node_selector"),
            "tolerations": [t.to_dict() for t in kw.get("tolerations") or []],
            "volumes": [v.to_dict() for v in kw.get("volumes") or []],
            "volume_mounts": [m.to_dict() for m in kw.get("volume_mounts") or []],
            "labels": kw.get("labels"), "annotations": kw.get("annotations"),
            "secrets": [s.__dict__ for s in kw.get("secrets") or []],
            "env": sorted(getattr(e, "name", e) for e in kw.get("env_vars") or []),
            "image_pull_secrets": [s.name for s in kw.get("image_pull_secrets") or []],
            "skip_on_exit_code": sorted(s if isinstance(s := kw.get("skip_on_exit_code") or [], (list, tuple, set)) else [s]),
        }
    return out


def timetable(dag) -> dict:
    """The DAG's schedule as Airflow holds it: the timetable's class and fields, its assets' URIs."""
    t = dag.timetable
    time = getattr(t, "timetable", t)  # AssetOrTimeSchedule: its time part
    parts = getattr(time, "timetables", None) or [time]

    def uris(cond) -> list:
        objects = getattr(cond, "objects", None)
        return [u for o in objects for u in uris(o)] if objects is not None else [getattr(cond, "uri", None)]

    cond = getattr(t, "asset_condition", None)
    return {"class": type(t).__name__, "time": type(time).__name__,
            "crons": [p.expression for p in parts if hasattr(p, "expression")],
            "timezones": sorted({str(p.timezone) for p in parts if hasattr(p, "timezone")}),
            "delta": time.delta.total_seconds() if hasattr(time, "delta") else None,
            "assets": sorted(u for u in uris(cond) if u) if cond is not None else [],
            "catchup": dag.catchup, "max_active_runs": dag.max_active_runs, "paused": dag.is_paused_upon_creation,
            "start_date": dag.start_date.isoformat() if dag.start_date else None}


def main(folder: str, out: str) -> None:
    t0 = time.perf_counter()
    from airflow.dag_processing.dagbag import DagBag

    t1 = time.perf_counter()
    bag = DagBag(dag_folder=folder)
    t2 = time.perf_counter()
    modules = sorted(m for m in sys.modules if m.split(".")[0] in WATCHED)
    Path(out).write_text(json.dumps({
        "errors": {k: str(v) for k, v in bag.import_errors.items()},
        "dags": {d.dag_id: {"schedule": str(d.schedule) if d.schedule else None, "params": sorted(d.params),
                            "timetable": timetable(d),
                            "tasks": {t.task_id: describe(t) for t in d.tasks}} for d in bag.dags.values()},
        "modules": modules, "interlock": sorted(m for m in sys.modules if m.split(".")[0] == "interlock"),
        "import_s": t1 - t0, "parse_s": t2 - t1,
    }, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
