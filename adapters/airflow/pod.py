"""A step as a KubernetesPodOperator: the step image running interlock's task entry
(``python -m interlock.adapters.airflow.entry``), with the step's resources, GPUs, node
selector, tolerations, ``/dev/shm``, labels (Kueue's queue label included), image pull
settings and secrets as Kubernetes secret env (references only: a value never reaches the DAG).

Compile time: the kwargs are plain data in the DAG description (``describe.py``); the loader
makes the provider's and Kubernetes' objects from them. The pod finds the spec by the
pipeline's reference (rebuilt in the image) and the run through the shared state root
(``state_pvc`` mounted at ``state_root``); Airflow's run id and the DAG run's params reach it as
templated env vars.
"""

from __future__ import annotations

import json
from typing import Any

from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.policies import kueue_labels

SKIP_EXIT = 99  # the entry's exit code for a node that does not start: the task is skipped
DEFAULT_IMAGE = "python:3.11-slim"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
PIPELINE_ENV, FINGERPRINT_ENV, PARAMS_ENV, DAG_RUN_ENV, OPTIONS_ENV = (
    "INTERLOCK_AIRFLOW_PIPELINE", "INTERLOCK_AIRFLOW_FINGERPRINT", "INTERLOCK_AIRFLOW_PARAMS",
    "INTERLOCK_AIRFLOW_DAG_RUN", "INTERLOCK_AIRFLOW_OPTIONS")


def pod_spec(spec: PipelineSpec, node: Node, options: dict[str, Any], args: list[str] | None) -> dict[str, Any]:
    """The pod's KubernetesPodOperator kwargs as plain data (the loader makes the Kubernetes
    objects): ``args`` the entry's arguments, None for a map's pods (expanded over the items')."""
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
    tolerations = [{"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect} for t in r.tolerations]
    if step.interruptible:  # onto the cluster's spot nodes, when the compile names them
        if options.get("spot_selector"):
            key, _, value = options["spot_selector"].partition("=")
            node_selector.setdefault(key, value)
        if options.get("spot_toleration"):
            key, _, value = options["spot_toleration"].partition("=")
            tolerations.append({"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"})
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if r.shared_memory:
        volumes.append({"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": r.shared_memory}})
        mounts.append({"name": "dshm", "mount_path": "/dev/shm"})
    if options.get("state_pvc"):
        volumes.append({"name": "interlock-state", "persistent_volume_claim": {"claim_name": options["state_pvc"]}})
        mounts.append({"name": "interlock-state", "mount_path": options.get("state_root") or "/opt/interlock"})
    labels = {**dict(step.labels), **kueue_labels(r), "interlock.dev/pipeline": spec.name[:63]}
    env = {
        # The pod rebuilds the spec from the pipeline's reference in its image (as on Argo and
        # Flyte): a DAG of N steps carries no N copies of the spec, and the fingerprint catches
        # an image whose step code differs from what was compiled.
        PIPELINE_ENV: spec.ref or "",
        FINGERPRINT_ENV: step.fingerprint,
        OPTIONS_ENV: json.dumps({k: options.get(k) for k in ("state_root", "checkpoint_store", "retries")}),
        PARAMS_ENV: "{{ params | tojson }}",
        DAG_RUN_ENV: "{{ run_id }}",
        "INTERLOCK_ON_CLUSTER": "1",
    }
    if spec.triggers:  # what started the run: its trigger's inputs, time or data URI (schedule.py)
        from .schedule import TRIGGER_ENV, TRIGGER_TEMPLATE

        env[TRIGGER_ENV] = TRIGGER_TEMPLATE
    out: dict[str, Any] = {
        "name": f"il-{node.name}".replace(".", "-").replace("_", "-").lower()[:60],
        "namespace": options.get("namespace") or "default",
        "image": step.image or options.get("image") or DEFAULT_IMAGE,
        "cmds": ["python", "-m", "interlock.adapters.airflow.entry"],
        "env_vars": env,
        # Secrets by reference (deploy type, env var, secret, key): a value never reaches the DAG.
        "secrets": [["env", s.env or f"{s.group}_{s.key}".upper().replace("-", "_"), s.group, s.key]
                    for s in step.secrets],
        "container_resources": {"requests": requests or None, "limits": limits or None},
        "node_selector": node_selector or None,
        "tolerations": tolerations or None,
        "volumes": volumes or None,
        "volume_mounts": mounts or None,
        "labels": labels,
        "annotations": dict(step.annotations) or None,
        "image_pull_policy": options.get("image_pull_policy") or "IfNotPresent",
        "image_pull_secrets": [options["image_pull_secret"]] if options.get("image_pull_secret") else None,
        "skip_on_exit_code": SKIP_EXIT,
        "get_logs": True,
        "on_finish_action": "delete_succeeded_pod",
    }
    if args is not None:
        out["arguments"] = args
    return out
