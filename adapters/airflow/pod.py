"""A step as a KubernetesPodOperator: the step image running interlock's task entry
(``python -m interlock.adapters.airflow.entry``), with the step's resources, GPUs, node
selector, tolerations, ``/dev/shm``, labels (Kueue's queue label included), image pull
settings and secrets as Kubernetes secret env (references only: a value never reaches the DAG).

The pod finds the run through the shared state root (``state_pvc`` mounted at
``state_root``); Airflow's run id and the DAG run's params reach it as templated env vars.
"""

from __future__ import annotations

import json
from typing import Any

from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.policies import kueue_labels

SKIP_EXIT = 99  # the entry's exit code for a node that does not start: the task is skipped
DEFAULT_IMAGE = "python:3.11-slim"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
SPEC_ENV, PARAMS_ENV, DAG_RUN_ENV, OPTIONS_ENV = (
    "INTERLOCK_AIRFLOW_SPEC", "INTERLOCK_AIRFLOW_PARAMS", "INTERLOCK_AIRFLOW_DAG_RUN", "INTERLOCK_AIRFLOW_OPTIONS")


def pod_kwargs(spec: PipelineSpec, node: Node, options: dict[str, Any], args: list[str]) -> dict[str, Any]:
    from airflow.providers.cncf.kubernetes.secret import Secret
    from kubernetes.client import models as k8s

    step = spec.step_of(node)
    r = step.resources
    requests = {k: str(v) for k, v in (("cpu", r.cpu), ("memory", r.memory),
                                       ("ephemeral-storage", r.ephemeral_storage)) if v}
    limits = {k: str(v) for k, v in (("cpu", r.cpu_limit), ("memory", r.memory_limit or r.memory)) if v}
    if r.gpu:
        limits["nvidia.com/gpu"] = str(r.gpu)
    node_selector = dict(r.node_selector)
    if r.accelerator:
        node_selector.setdefault(GKE_ACCELERATOR_LABEL, r.accelerator)
    tolerations = [k8s.V1Toleration(key=t.key, operator=t.operator, value=t.value, effect=t.effect)
                   for t in r.tolerations]
    if step.interruptible:  # onto the cluster's spot nodes, when the compile names them
        if options.get("spot_selector"):
            key, _, value = options["spot_selector"].partition("=")
            node_selector.setdefault(key, value)
        if options.get("spot_toleration"):
            key, _, value = options["spot_toleration"].partition("=")
            tolerations.append(k8s.V1Toleration(key=key, operator="Equal", value=value, effect="NoSchedule"))
    volumes, mounts = [], []
    if r.shared_memory:
        volumes.append(k8s.V1Volume(name="dshm", empty_dir=k8s.V1EmptyDirVolumeSource(
            medium="Memory", size_limit=r.shared_memory)))
        mounts.append(k8s.V1VolumeMount(name="dshm", mount_path="/dev/shm"))
    if options.get("state_pvc"):
        volumes.append(k8s.V1Volume(name="interlock-state", persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
            claim_name=options["state_pvc"])))
        mounts.append(k8s.V1VolumeMount(name="interlock-state", mount_path=options.get("state_root") or "/opt/interlock"))
    labels = {**dict(step.labels), **kueue_labels(r), "interlock.dev/pipeline": spec.name[:63]}
    env = {
        SPEC_ENV: spec.dumps(),
        OPTIONS_ENV: json.dumps({k: options.get(k) for k in ("state_root", "checkpoint_store")}),
        PARAMS_ENV: "{{ params | tojson }}",
        DAG_RUN_ENV: "{{ run_id }}",
        "INTERLOCK_ON_CLUSTER": "1",
    }
    if spec.triggers:  # what started the run: its trigger's inputs, time or data URI (schedule.py)
        from .schedule import TRIGGER_ENV, TRIGGER_TEMPLATE

        env[TRIGGER_ENV] = TRIGGER_TEMPLATE
    return {
        "name": f"il-{node.name}".replace(".", "-").replace("_", "-").lower()[:60],
        "namespace": options.get("namespace") or "default",
        "image": step.image or options.get("image") or DEFAULT_IMAGE,
        "cmds": ["python", "-m", "interlock.adapters.airflow.entry"],
        "arguments": args,
        "env_vars": env,
        "secrets": [Secret("env", s.env or f"{s.group}_{s.key}".upper().replace("-", "_"), s.group, s.key)
                    for s in step.secrets],
        "container_resources": k8s.V1ResourceRequirements(requests=requests or None, limits=limits or None),
        "node_selector": node_selector or None,
        "tolerations": tolerations or None,
        "volumes": volumes or None,
        "volume_mounts": mounts or None,
        "labels": labels,
        "annotations": dict(step.annotations) or None,
        "image_pull_policy": options.get("image_pull_policy") or "IfNotPresent",
        "image_pull_secrets": [k8s.V1LocalObjectReference(name=options["image_pull_secret"])]
        if options.get("image_pull_secret") else None,
        "skip_on_exit_code": SKIP_EXIT,
        "get_logs": True,
        "on_finish_action": "delete_succeeded_pod",
    }


def pod_task(spec: PipelineSpec, node: Node, options: dict[str, Any], kind: str, task_id: str, rule: str,
             common: dict[str, Any]) -> Any:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    return KubernetesPodOperator(task_id=task_id, trigger_rule=rule, **common,
                                 **pod_kwargs(spec, node, options, [kind, node.name]))


def pod_map_task(spec: PipelineSpec, node: Node, options: dict[str, Any], task_id: str, items: Any,
                 common: dict[str, Any]) -> Any:
    """One pod per item: dynamic task mapping over the items' entry arguments (``<node>.items``
    returns them: ``["item", node, index]`` each)."""
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    kw = pod_kwargs(spec, node, options, [])
    kw.pop("arguments")
    return KubernetesPodOperator.partial(task_id=task_id, **common, **kw).expand(arguments=items)
