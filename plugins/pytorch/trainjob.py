"""A distributed step as a Kubernetes job: Kubeflow Trainer's TrainJob or a PyTorchJob.

Backend-neutral: the KFP launcher task creates the job through the Kubernetes API, an Argo
resource template has the workflow controller create it; each backend names its own rank
entry module and arguments, and the manager of the runtime patch.

Kubeflow Trainer v2 (``TrainJob``, ``trainer.kubeflow.org/v1alpha1``) is the default: the
job names a training runtime (``ClusterTrainingRuntime`` ``torch-distributed`` unless the
compile option ``trainjob_runtime`` says otherwise) and overrides only what the step decides:
image, command, number of nodes, processes per node, resources per node; tolerations, node
selector, volumes and pod labels go in a ``runtimePatches`` entry. Clusters still on Training
Operator v1 get a ``PyTorchJob`` (``kubeflow.org/v1``) with ``distributed_job=pytorchjob``.

The manifest is generated here, not with the ``kubeflow`` SDK's ``TrainerClient``: the SDK
is not a dependency, and the launchers only need create/get/delete on a custom object.

Compile time produces a ``JobTemplate`` (plain JSON); ``render`` fills in the name, the run's
identity and the rank command: every rank runs ``torchrun -m <backend's rank module> ARGS``,
the same shim as every other task of that backend, one process per rank.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from interlock.core.base.errors import PolicyError
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.policies import kueue_labels
from interlock.core.model.spec import StepSpec

TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
TRAINJOB_PLURAL = "trainjobs"
TRAINING_OPERATOR_GROUP = "kubeflow.org"
TRAINING_OPERATOR_VERSION = "v1"
PYTORCHJOB_PLURAL = "pytorchjobs"
# The replicated job and container that the torch runtimes of Kubeflow Trainer name "node".
TRAINER_NODE = "node"
PYTORCH_CONTAINER = "pytorch"  # the container name the training operator requires


@dataclass(frozen=True)
class RankEntry:
    """What every rank runs (``torchrun -m module *args``) and who owns the runtime patch."""

    module: str
    args: tuple[str, ...]
    manager: str  # the runtimePatches entry's manager, e.g. interlock.dev/kfp-launcher


class JobKind(StrEnum):
    TRAINJOB = "trainjob"  # Kubeflow Trainer v2 (default)
    PYTORCHJOB = "pytorchjob"  # Training Operator v1

    @property
    def group(self) -> str:
        return TRAINER_GROUP if self is JobKind.TRAINJOB else TRAINING_OPERATOR_GROUP

    @property
    def version(self) -> str:
        return TRAINER_VERSION if self is JobKind.TRAINJOB else TRAINING_OPERATOR_VERSION

    @property
    def plural(self) -> str:
        return TRAINJOB_PLURAL if self is JobKind.TRAINJOB else PYTORCHJOB_PLURAL

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def kind(self) -> str:
        return "TrainJob" if self is JobKind.TRAINJOB else "PyTorchJob"

    @classmethod
    def parse(cls, value: str | JobKind) -> JobKind:
        try:
            return cls(str(value).lower())
        except ValueError:
            raise PolicyError(
                f"distributed_job={value!r} is not a job kind interlock can launch",
                hint="use distributed_job=trainjob (Kubeflow Trainer v2, default) or pytorchjob (Training Operator v1)",
            ) from None


@dataclass(frozen=True)
class JobTemplate:
    """What compile time decides about a distributed step's job (JSON-able, embedded in the component)."""

    kind: str
    pipeline: str
    node: str
    image: str
    nnodes: int
    nproc_per_node: int
    runtime: str = "torch-distributed"
    runtime_kind: str = "ClusterTrainingRuntime"
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # on the job and on every rank's pod
    # Kueue's labels go on the job object only: Kueue admits the whole job as one gang (its
    # integration suspends the job until every pod fits), never the ranks one by one.
    queue_labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    secret_env: list[dict[str, str]] = field(default_factory=list)  # {name, secret, key}
    state_pvc: str | None = None
    state_mount: str = "/interlock-state"
    shared_memory: str | None = None
    active_deadline_s: int | None = None

    @property
    def job_kind(self) -> JobKind:
        return JobKind(self.kind)

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobTemplate:
        return cls(**data)


def job_template(
    spec: PipelineSpec, step: StepSpec, node: str, *, kind: JobKind, image: str, runtime: str,
    accelerator_resource: str, accelerator_selector: dict[str, str], state_pvc: str | None, state_mount: str,
    env: dict[str, str], spot_node_selector: tuple[tuple[str, str], ...] = (),
    spot_tolerations: tuple[Any, ...] = (),
) -> JobTemplate:
    """The job for ``node``: the step's resources are per node (pod), as with Flyte's kfpytorch."""
    t = step.distributed
    assert t is not None
    if t.elastic:
        raise PolicyError(
            f"step {step.name!r}: an elastic node range (min_nodes={t.min_nodes}) has no TrainJob rendering",
            step=node, pipeline=spec.name,
            hint="drop min_nodes (a fixed world), or compile for Flyte (torch elastic)",
        )
    r = step.resources
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if r.cpu:
        requests["cpu"] = r.cpu
    if r.cpu_limit:
        limits["cpu"] = r.cpu_limit
    if r.memory:
        requests["memory"] = r.memory
    if r.memory_limit or r.memory:
        limits["memory"] = r.memory_limit or r.memory or ""
    if r.ephemeral_storage:
        requests["ephemeral-storage"] = r.ephemeral_storage
    if r.gpu:  # extended resources: request == limit
        requests[accelerator_resource] = limits[accelerator_resource] = str(r.gpu)
    selector = dict(r.node_selector)
    for k, v in accelerator_selector.items():
        selector.setdefault(k, v)
    tolerations = list(r.tolerations)
    if step.interruptible:
        for k, v in spot_node_selector:
            selector.setdefault(k, v)
        tolerations += [x for x in spot_tolerations if x not in tolerations]
    return JobTemplate(
        kind=kind.value, pipeline=spec.name, node=node, image=image, nnodes=t.nnodes,
        nproc_per_node=t.nproc_per_node, runtime=runtime, requests=requests, limits=limits,
        node_selector=dict(sorted(selector.items())),
        tolerations=[{k: v for k, v in asdict(x).items() if v is not None} for x in tolerations],
        labels={**dict(spec.labels), **dict(step.labels)}, queue_labels=kueue_labels(r),
        annotations=dict(step.annotations), env=dict(sorted(env.items())),
        secret_env=[{"name": s.env_var, "secret": s.group, "key": s.key} for s in step.secrets],
        state_pvc=state_pvc, state_mount=state_mount, shared_memory=r.shared_memory,
        active_deadline_s=max(1, int(step.timeout_s)) if step.timeout_s else None,
    )


_DNS = re.compile(r"[^a-z0-9-]+")


def job_name(pipeline: str, node: str, run_id: str, attempt: int = 1) -> str:
    """A DNS-1035 label (TrainJob names become JobSet and Service names): <= 40 characters here,
    unique per run, node and launch."""
    import hashlib

    digest = hashlib.sha1(f"{pipeline}/{node}/{run_id}/{attempt}".encode()).hexdigest()[:8]
    stem = _DNS.sub("-", f"{node}".lower()).strip("-")[:24].strip("-") or "step"
    if not stem[0].isalpha():
        stem = f"s-{stem}"[:24]
    return f"{stem}-{digest}-{attempt}"


def rank_command(t: JobTemplate, entry: RankEntry) -> tuple[list[str], list[str]]:
    """torchrun on every node: it starts nproc_per_node ranks with RANK/WORLD_SIZE/MASTER_* set.

    Kubeflow Trainer sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and
    PET_MASTER_PORT, which torchrun reads as its defaults. The training operator (v1) sets
    PET_NODE_RANK and PET_NPROC_PER_NODE, but the master only as MASTER_ADDR/MASTER_PORT: Kubernetes
    expands ``$(VAR)`` in args from the container's environment.
    """
    args = [f"--nnodes={t.nnodes}", f"--nproc-per-node={t.nproc_per_node}"]
    if t.job_kind is JobKind.PYTORCHJOB:
        args += ["--node-rank=$(PET_NODE_RANK)", "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)"]
    return ["torchrun"], [*args, "-m", entry.module, *entry.args]


def _env_list(t: JobTemplate, run_env: dict[str, str]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted({**t.env, **run_env}.items())]
    env += [
        {"name": s["name"], "valueFrom": {"secretKeyRef": {"name": s["secret"], "key": s["key"]}}}
        for s in t.secret_env
    ]
    return env


def _volumes(t: JobTemplate) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if t.state_pvc:
        volumes.append({"name": "interlock-state", "persistentVolumeClaim": {"claimName": t.state_pvc}})
        mounts.append({"name": "interlock-state", "mountPath": t.state_mount})
    if t.shared_memory:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": t.shared_memory}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    return volumes, mounts


def _resources(t: JobTemplate) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.requests:
        out["requests"] = dict(t.requests)
    if t.limits:
        out["limits"] = dict(t.limits)
    return out


def render(
    t: JobTemplate, *, entry: RankEntry, run_env: dict[str, str], name: str | None = None,
    generate_name: str | None = None, namespace: str | None = None,
    owner: dict[str, str] | None = None, extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The job's manifest. ``name`` or ``generate_name`` (the API server adds a suffix: each
    retry of an Argo resource template creates a job of its own); no ``namespace``: the one it
    is created in. ``owner``: a pod (name, uid), so that Kubernetes garbage-collects the job
    with the pod even if the launcher dies without cleaning up."""
    labels = {**t.labels, "interlock.dev/pipeline": _label(t.pipeline), "interlock.dev/node": _label(t.node),
              **(extra_labels or {})}
    metadata: dict[str, Any] = {"name": name} if name else {"generateName": generate_name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {**labels, **t.queue_labels}
    if t.annotations:
        metadata["annotations"] = dict(t.annotations)
    if owner:
        metadata["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "Pod", "name": owner["name"], "uid": owner["uid"],
            "blockOwnerDeletion": False, "controller": False,
        }]
    command, args = rank_command(t, entry)
    env = _env_list(t, run_env)
    volumes, mounts = _volumes(t)
    if t.job_kind is JobKind.TRAINJOB:
        return _trainjob(t, metadata, labels, command, args, env, volumes, mounts, entry.manager)
    return _pytorchjob(t, metadata, labels, command, args, env, volumes, mounts)


def _label(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", value)[:63].strip("-_.") or "x"


def _trainjob(
    t: JobTemplate, metadata: dict[str, Any], pod_labels: dict[str, str], command: list[str], args: list[str],
    env: list[dict[str, Any]],
    volumes: list[dict[str, Any]], mounts: list[dict[str, Any]], manager: str,
) -> dict[str, Any]:
    trainer: dict[str, Any] = {
        "image": t.image, "command": command, "args": args, "env": env,
        "numNodes": t.nnodes, "numProcPerNode": t.nproc_per_node,
    }
    resources = _resources(t)
    if resources:
        trainer["resourcesPerNode"] = resources
    pod_spec: dict[str, Any] = {}
    if t.node_selector:
        pod_spec["nodeSelector"] = dict(t.node_selector)
    if t.tolerations:
        pod_spec["tolerations"] = [dict(x) for x in t.tolerations]
    if volumes:
        pod_spec["volumes"] = volumes
        pod_spec["containers"] = [{"name": TRAINER_NODE, "volumeMounts": mounts}]
    pod_template: dict[str, Any] = {"metadata": {"labels": pod_labels}}
    if pod_spec:
        pod_template["spec"] = pod_spec
    job_spec: dict[str, Any] = {
        "runtimeRef": {"apiGroup": TRAINER_GROUP, "kind": t.runtime_kind, "name": t.runtime},
        "trainer": trainer,
        # Pod-level settings the runtime does not know: one patch entry owned by interlock.
        "runtimePatches": [{
            "manager": manager,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": TRAINER_NODE, "template": {"spec": {"template": pod_template}}},
            ]}}},
        }],
    }
    if t.active_deadline_s:
        job_spec["activeDeadlineSeconds"] = t.active_deadline_s
    return {"apiVersion": JobKind.TRAINJOB.api_version, "kind": "TrainJob", "metadata": metadata, "spec": job_spec}


def _pytorchjob(
    t: JobTemplate, metadata: dict[str, Any], pod_labels: dict[str, str], command: list[str], args: list[str],
    env: list[dict[str, Any]],
    volumes: list[dict[str, Any]], mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": PYTORCH_CONTAINER, "image": t.image, "command": command, "args": args, "env": env}
    resources = _resources(t)
    if resources:
        container["resources"] = resources
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {"containers": [container]}
    if t.node_selector:
        pod_spec["nodeSelector"] = dict(t.node_selector)
    if t.tolerations:
        pod_spec["tolerations"] = [dict(x) for x in t.tolerations]
    if volumes:
        pod_spec["volumes"] = volumes

    def replica(count: int) -> dict[str, Any]:
        # The job fails as a whole: a rank failure is judged by the launcher, and retried as a new job.
        return {"replicas": count, "restartPolicy": "Never",
                "template": {"metadata": {"labels": dict(pod_labels)}, "spec": pod_spec}}

    specs = {"Master": replica(1)}
    if t.nnodes > 1:
        specs["Worker"] = replica(t.nnodes - 1)
    run_policy: dict[str, Any] = {"cleanPodPolicy": "None", "backoffLimit": 0}
    if t.active_deadline_s:
        run_policy["activeDeadlineSeconds"] = t.active_deadline_s
    return {
        "apiVersion": JobKind.PYTORCHJOB.api_version, "kind": "PyTorchJob", "metadata": metadata,
        "spec": {"pytorchReplicaSpecs": specs, "nprocPerNode": str(t.nproc_per_node), "runPolicy": run_policy},
    }
