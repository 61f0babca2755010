"""The small loader a generated DAG file calls at parse time: the DAG description -> an Airflow DAG.

The scheduler parses DAG files every few seconds, so this does what a hand-written DAG file
does and no more: it reads the plain-JSON description that ``interlock compile`` rendered into
the sidecar (``describe.py``: every task's id, kind, trigger rule, upstream ids, group, retry
and timeout arguments, a pod's kwargs; the DAG's params and schedule) and makes one Airflow
object per task. It imports Airflow (and the cncf provider for pods), the task bodies
(``tasks.py``) and the retry policy (``retry_policy.py``), never interlock's core, the
pipeline's module, flytekit, kfp, torch or pandas; the tests check it in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

SPEC_SUFFIX = ".interlock.json"  # beside the DAG file: the spec, its compile options, the DAG description
_DESCRIPTIONS: dict[str, tuple[float, dict[str, Any]]] = {}
_BODIES: dict[str, Any] = {}  # the task bodies, decorated (``_bodies``)


def description(spec_file: str) -> dict[str, Any]:
    """The DAG description in a sidecar file, read once per change of the file."""
    mtime = os.stat(spec_file).st_mtime
    held = _DESCRIPTIONS.get(spec_file)
    if held is None or held[0] != mtime:
        held = (mtime, json.loads(Path(spec_file).read_text())["dag"])
        _DESCRIPTIONS[spec_file] = held
    return held[1]


def load_dag(dag_file: str) -> Any:
    """The DAG for the spec compiled beside ``dag_file`` (``<name>.py`` + ``<name>.interlock.json``)."""
    spec_file = str(Path(dag_file).with_suffix(SPEC_SUFFIX))
    return build_dag(description(spec_file), spec_file)


def build_dag(desc: dict[str, Any], spec_file: str) -> Any:
    """The Airflow DAG of a description; its tasks read the spec from ``spec_file`` when they run."""
    from airflow.sdk import DAG, Param, TaskGroup

    d = desc["dag"]
    kw: dict[str, Any] = {k: d[k] for k in ("catchup", "max_active_runs", "is_paused_upon_creation") if k in d}
    if d.get("start_date"):
        kw["start_date"] = datetime.fromisoformat(d["start_date"])
    params = {name: Param(p["default"], **_type(p)) if "default" in p else Param(**_type(p))
              for name, p in d["params"].items()}
    dag = DAG(dag_id=d["dag_id"], schedule=_schedule(d["timetable"]), params=params, tags=d["tags"],
              doc_md=d["doc_md"], default_args=d["default_args"], **kw)
    with dag:
        groups: dict[str, Any] = {}
        for gid, g in desc["groups"].items():  # a parent before its children (plan order)
            groups[gid] = TaskGroup(group_id=gid, prefix_group_id=False, tooltip=g["tooltip"],
                                    parent_group=groups[g["parent"]] if g["parent"] else None)
        made: dict[str, Any] = {}
        for t in desc["tasks"]:
            made[t["id"]] = _task(t, made, groups.get(t["group"]) if t["group"] else None, spec_file)
        for t in desc["tasks"]:
            for u in t["upstream"]:
                made[u] >> made[t["id"]]
    return dag


def _type(p: dict[str, Any]) -> dict[str, Any]:
    return {"type": p["type"]} if "type" in p else {}


def _schedule(t: dict[str, Any] | None) -> Any:
    """The DAG's ``schedule=``: a timetable, an asset expression, both, or None."""
    if t is None:
        return None
    from airflow.sdk import (
        Asset,
        AssetOrTimeSchedule,
        CronTriggerTimetable,
        DeltaTriggerTimetable,
        MultipleCronTriggerTimetable,
    )

    crons = t["crons"]
    time: Any = None
    if len(crons) == 1:
        time = CronTriggerTimetable(crons[0], timezone=t["tz"])
    elif crons:
        time = MultipleCronTriggerTimetable(*crons, timezone=t["tz"])
    elif t["every_s"] is not None:
        time = DeltaTriggerTimetable(timedelta(seconds=t["every_s"]))
    assets: Any = None
    for uri in t["assets"]:
        assets = Asset(uri) if assets is None else assets | Asset(uri)
    if time is not None and assets is not None:
        return AssetOrTimeSchedule(timetable=time, assets=assets)
    return time if time is not None else assets


def _args(a: dict[str, Any]) -> dict[str, Any]:
    """A task's retry and timeout arguments from their plain form (seconds, a policy flag)."""
    kw = dict(a)
    for k in ("retry_delay", "max_retry_delay", "execution_timeout"):
        if k in kw:
            kw[k] = timedelta(seconds=kw[k])
    if kw.pop("retry_policy", False):
        from .retry_policy import ShimRetryPolicy

        kw["retry_policy"] = ShimRetryPolicy()
    return kw


def _bodies() -> dict[str, Any]:
    """Each task body decorated once, as a hand-written DAG does; each task is an ``override``."""
    if not _BODIES:
        from airflow.sdk import task

        from . import tasks

        _BODIES.update(step=task(tasks.run_step), finally_=task(tasks.run_finally), items=task(tasks.map_items),
                       pod_items=task(tasks.map_pod_args), mapped=task(tasks.map_item),
                       collect=task(tasks.map_collect), gate=task.short_circuit(tasks.gate_holds))
    return _BODIES


def _task(t: dict[str, Any], made: dict[str, Any], group: Any, spec_file: str) -> Any:
    kind, node, pod = t["kind"], t["node"], t.get("pod")
    common = {"task_id": t["id"], "task_group": group, **_args(t["args"])}
    if t["rule"] is not None:
        common["trigger_rule"] = t["rule"]
    bodies = _bodies()
    if kind == "gate":
        return bodies["gate"].override(ignore_downstream_trigger_rules=False, **common)(spec_file, t["gate"])
    if kind == "items":
        return bodies["pod_items" if t.get("pods") else "items"].override(**common)(spec_file, node)
    if kind == "collect":
        return bodies["collect"].override(**common)(spec_file, node)
    if kind == "mapped":
        limit = {"max_active_tis_per_dag": t["limit"]} if t["limit"] else {}
        if pod is not None:
            from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

            return KubernetesPodOperator.partial(**common, **limit, **_pod(pod)).expand(arguments=made[t["items"]])
        return bodies["mapped"].override(**common, **limit).partial(spec_file=spec_file, node=node).expand(
            index=made[t["items"]])
    if pod is not None:  # a step or finally task as a pod
        from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

        return KubernetesPodOperator(**common, **_pod(pod))
    return bodies["finally_" if kind == "finally" else "step"].override(**common)(spec_file, node)


def _pod(p: dict[str, Any]) -> dict[str, Any]:
    """A pod's KubernetesPodOperator kwargs: the Kubernetes objects from their plain form (``pod.py``)."""
    from airflow.providers.cncf.kubernetes.secret import Secret
    from kubernetes.client import models as k8s

    kw = dict(p)
    kw["secrets"] = [Secret(*s) for s in p["secrets"]]
    kw["container_resources"] = k8s.V1ResourceRequirements(**p["container_resources"])
    if p["tolerations"]:
        kw["tolerations"] = [k8s.V1Toleration(**t) for t in p["tolerations"]]
    if p["volumes"]:
        kw["volumes"] = [k8s.V1Volume(
            name=v["name"],
            empty_dir=k8s.V1EmptyDirVolumeSource(**v["empty_dir"]) if "empty_dir" in v else None,
            persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(**v["persistent_volume_claim"])
            if "persistent_volume_claim" in v else None) for v in p["volumes"]]
    if p["volume_mounts"]:
        kw["volume_mounts"] = [k8s.V1VolumeMount(**m) for m in p["volume_mounts"]]
    if p["image_pull_secrets"]:
        kw["image_pull_secrets"] = [k8s.V1LocalObjectReference(name=n) for n in p["image_pull_secrets"]]
    return kw
