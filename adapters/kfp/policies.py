"""Step policies -> KFP task settings and the kfp-kubernetes platform spec.

Everything here acts on one ``PipelineTask`` while the pipeline body is being built.
Task settings (retry, caching, resources, accelerator, env) land in the pipeline spec
(first YAML document); Kubernetes settings (node selector, tolerations, pod labels and
annotations, secrets, timeout, volumes, downward-API env) land in the platform spec
(second YAML document). Secrets are only ever references: secret name, key, env var.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import BackendOptions
from interlock.core.base.status import FailureKind
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.policies import kueue_labels
from interlock.core.model.policies_opt_in import Toleration
from interlock.core.model.retry import Retry
from interlock.core.model.spec import StepSpec
from interlock.core.run.env import EnvName, RunEnv

from .names import RUN_ID_ENV, RUN_ID_LABEL

# Kinds the shim retries inside the container: TRANSIENT (at once, cheap) and FATAL (only
# OOM remediation ever retries a FATAL). CONTENTION and PREEMPTED need a new pod, after a
# wait: that is KFP's set_retry with backoff.
IN_PROCESS = frozenset({FailureKind.TRANSIENT, FailureKind.FATAL})
STATE_MOUNT = "/interlock-state"


GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GKE_PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"  # a MIG slice's profile, e.g. 1g.5gb
# interlock's accelerator names (Flyte's device names) -> GKE's values of its accelerator label.
# GKE names some models by memory size (an H200 is nvidia-h200-141gb): a name written through
# unchanged would match no node and leave the pod Pending for ever.
GKE_ACCELERATORS: dict[str, str] = {
    "nvidia-tesla-a100": "nvidia-tesla-a100",
    "nvidia-a100": "nvidia-tesla-a100",
    "nvidia-a100-40gb": "nvidia-tesla-a100",
    "nvidia-a100-80gb": "nvidia-a100-80gb",
    "nvidia-h100": "nvidia-h100-80gb",
    "nvidia-h100-80gb": "nvidia-h100-80gb",
    "nvidia-h100-mega-80gb": "nvidia-h100-mega-80gb",
    "nvidia-h200": "nvidia-h200-141gb",
    "nvidia-h200-141gb": "nvidia-h200-141gb",
    "nvidia-b200": "nvidia-b200",
    "nvidia-gb200": "nvidia-gb200",
    "nvidia-l4": "nvidia-l4",
    "nvidia-rtx-pro-6000": "nvidia-rtx-pro-6000",
    "nvidia-tesla-t4": "nvidia-tesla-t4",
    "nvidia-t4": "nvidia-tesla-t4",
    "nvidia-tesla-v100": "nvidia-tesla-v100",
    "nvidia-v100": "nvidia-tesla-v100",
    "nvidia-tesla-p100": "nvidia-tesla-p100",
    "nvidia-tesla-p4": "nvidia-tesla-p4",
}


# Node labels per managed Kubernetes: the GPU model's label (GKE's; elsewhere no standard
# label names the model) and spot capacity.
CLOUD_PRESETS: dict[str, dict[str, Any]] = {
    "gke": {
        "accelerator_label": GKE_ACCELERATOR_LABEL,
        "spot_node_selector": (("cloud.google.com/gke-spot", "true"),),
        "spot_tolerations": (Toleration(key="cloud.google.com/gke-spot", operator="Equal", value="true",
                                        effect="NoSchedule"),),
    },
    "eks": {  # managed node groups label their capacity type; spot nodes carry no taint
        "spot_node_selector": (("eks.amazonaws.com/capacityType", "SPOT"),),
    },
    "aks": {  # AKS spot node pools are labelled and tainted with the scale set priority
        "spot_node_selector": (("kubernetes.azure.com/scalesetpriority", "spot"),),
        "spot_tolerations": (Toleration(key="kubernetes.azure.com/scalesetpriority", operator="Equal", value="spot",
                                        effect="NoSchedule"),),
    },
}


def accelerator_selector(step: StepSpec, opts: KfpOptions) -> dict[str, str]:
    """The node labels that pick the step's GPU model: GKE's own value of its accelerator label
    (and a MIG slice's partition label), or the name as written under any other label."""
    r = step.resources
    if not (r.gpu and r.accelerator and opts.accelerator_label):
        return {}
    if opts.accelerator_label != GKE_ACCELERATOR_LABEL:
        return {opts.accelerator_label: r.accelerator}
    device, _, partition = r.accelerator.partition(":")
    value = GKE_ACCELERATORS.get(device)
    if value is None:
        from interlock.core.base.errors import PolicyError

        raise PolicyError(
            f"step {step.name!r}: accelerator {r.accelerator!r} is not a GPU GKE offers",
            step=step.name,
            hint=f"use one of {', '.join(sorted(GKE_ACCELERATORS))}; for another cluster drop cloud=gke "
            "or give accelerator_label=NODE_LABEL, which takes the name as written",
        )
    return {GKE_ACCELERATOR_LABEL: value, **({GKE_PARTITION_LABEL: partition} if partition else {})}


def neutral_notes(spec: PipelineSpec, opts: KfpOptions) -> list[str]:
    """What a cloud-neutral compile leaves to the cluster, per step, for a warning."""
    notes = []
    for step in spec.steps:
        if step.interruptible and not opts.spot_node_selector and not opts.spot_tolerations:
            notes.append(f"step {step.name!r} is interruptible but no spot node labels are set: it schedules on "
                         "any node (pass --option cloud=gke|eks|aks, or spot_node_selector=KEY=VALUE)")
        if step.resources.gpu and step.resources.accelerator and not opts.accelerator_label:
            notes.append(f"step {step.name!r} asks for accelerator {step.resources.accelerator!r}: compiled as a GPU "
                         "count only (pass --option cloud=gke, or accelerator_label=NODE_LABEL)")
    return notes


@dataclass(frozen=True)
class KfpLocalOptions(BackendOptions):
    """Run options of ``kfp-local`` (``il.run(..., options=KfpLocalOptions(...))``)."""

    # Record the run with the installed lineage provider (entry point group interlock.lineage).
    lineage: bool = True


@dataclass(frozen=True)
class KfpOptions(BackendOptions):
    """Compile options of ``kfp`` and ``kfp-local`` (``interlock compile --backend kfp --option K=V``)."""

    image: str | None = None  # default image for steps without their own
    caching: bool = True  # False: no task is cached, whatever the steps say
    # KFP OSS: accelerator type is the resource name; the GPU model goes in a node selector.
    accelerator_resource: str = "nvidia.com/gpu"
    # The node labels for the GPU model and for spot capacity are the cloud's: `cloud` picks
    # a preset (CLOUD_PRESETS: gke, eks, aks); the explicit fields below win over it. Without
    # either, a GPU step asks for the GPU count only and "interruptible" adds no spot
    # scheduling (the compile says so), so pods schedule on any cluster.
    cloud: str | None = None
    accelerator_label: str | None = None
    # What "interruptible" means on the cluster: schedule onto spot nodes and tolerate them.
    spot_node_selector: tuple[tuple[str, str], ...] = ()
    spot_tolerations: tuple[Toleration, ...] = ()
    pvc_mounts: tuple[tuple[str, str], ...] = ()  # (pvc name, mount path) on every step
    # Where stop markers and receipt fragments survive a pod (a KFP retry runs in a fresh one):
    # a PVC mounted on every step, else a store URI (state_store), else the pipeline root.
    state_pvc: str | None = None
    pipeline_root: str | None = None  # the IR's default pipeline root (s3://bucket/path)
    state_store: str | None = None  # default: pipeline_root
    # Where steps without their own CheckpointPolicy(store=) keep checkpoints (s3://...);
    # default: the run's state (the PVC or state_store).
    checkpoint_store: str | None = None
    run_id_from_pod_label: bool = True  # RUN_ID_ENV from the pod's pipeline/runid label
    # kfp.local evaluates dsl.If only on outputs named "Output": route other gates through as_bool.
    local_conditions: bool = False
    # Distributed steps (il.Torchrun): the job the launcher task creates (see trainjob.py).
    distributed_job: str = "trainjob"  # trainjob (Kubeflow Trainer v2) | pytorchjob (Training Operator v1)
    trainjob_runtime: str = "torch-distributed"  # the ClusterTrainingRuntime a TrainJob references
    # The image's Dockerfile and requirements next to the YAML (image.py), from base_image
    # (default image.DEFAULT_BASE) plus extra requirements, copying the code from context.
    emit_image: bool = False
    requirements: tuple[str, ...] = ()
    base_image: str | None = None
    context: str | None = None
    # `interlock triggers apply --backend kfp`: the KFP API (kfp.Client(host=...)), the
    # experiment the recurring runs belong to, and the user namespace of a multi-user install.
    host: str | None = None
    experiment: str = "Default"
    namespace: str | None = None

    def __post_init__(self) -> None:
        if self.cloud is None:
            return
        preset = CLOUD_PRESETS.get(self.cloud)
        if preset is None:
            from interlock.core.base.errors import PolicyError

            raise PolicyError(f"kfp option cloud={self.cloud!r} is not one of {sorted(CLOUD_PRESETS)}",
                              hint="or leave it unset and give accelerator_label / spot_node_selector yourself")
        for name, value in preset.items():  # fields left at their neutral default take the preset
            if getattr(self, name) in (None, ()):
                object.__setattr__(self, name, value)

    @property
    def durable_state(self) -> str | None:
        """Where node state outlives a pod, in words for messages; None: nowhere."""
        if self.state_pvc:
            return f"PVC {self.state_pvc}"
        return self.state_store_uri

    @property
    def state_store_uri(self) -> str | None:
        """The store the shim mirrors node state to (unless the state volume holds it)."""
        if self.state_pvc:
            return None
        return self.state_store or self.pipeline_root


    @classmethod
    def from_options(cls, **options: Any) -> KfpOptions:
        """Build from keywords; values may be strings, as ``interlock compile --option K=V`` gives them."""
        return cls.from_mapping(options, backend="kfp", role="compile")

    @classmethod
    def convert(cls, options: dict[str, Any]) -> dict[str, Any]:
        values = dict(options)
        for name in ("caching", "run_id_from_pod_label", "local_conditions", "emit_image"):
            if isinstance(values.get(name), str):
                values[name] = parse_bool(name, values[name])
        if isinstance(values.get("requirements"), str):  # requirements=scikit-learn==1.5.2,xgboost==2.1.1
            values["requirements"] = [r for r in values["requirements"].split(",") if r]
        if isinstance(values.get("requirements"), list):
            values["requirements"] = tuple(values["requirements"])
        if isinstance(values.get("pvc_mounts"), str):  # "data:/data,models:/models"
            values["pvc_mounts"] = tuple(tuple(item.split(":", 1)) for item in values["pvc_mounts"].split(",") if item)
        if isinstance(values.get("spot_node_selector"), str):  # "key=value,key2=value2"
            values["spot_node_selector"] = tuple(
                tuple(item.split("=", 1)) for item in values["spot_node_selector"].split(",") if item
            )
        for name in ("pvc_mounts", "spot_node_selector"):
            if isinstance(values.get(name), dict):
                values[name] = tuple(values[name].items())
        if "spot_tolerations" in values:
            values["spot_tolerations"] = tuple(
                t if isinstance(t, Toleration) else Toleration(**t) for t in values["spot_tolerations"]
            )
        if values.get("accelerator_label") == "":
            values["accelerator_label"] = None
        return values


def parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    from interlock.core.base.errors import PolicyError

    raise PolicyError(f"kfp option {name}={text!r} is not a boolean (true/false)")


@dataclass(frozen=True)
class RetryMapping:
    """KFP ``set_retry`` arguments for one step (None: no KFP retries; None backoff: KFP's own)."""

    num_retries: int
    backoff_duration: str | None = None
    backoff_factor: float | None = None
    backoff_max_duration: str | None = None

    def kwargs(self) -> dict[str, Any]:
        kw = {
            "num_retries": self.num_retries,
            "backoff_duration": self.backoff_duration,
            "backoff_factor": self.backoff_factor,
            "backoff_max_duration": self.backoff_max_duration,
        }
        return {k: v for k, v in kw.items() if v is not None}


def _seconds(value: float) -> str:
    return f"{int(round(value))}s"


def retry_mapping(retry: Retry) -> RetryMapping | None:
    """The KFP ``set_retry`` for a step's policy.

    ``Retry(N)`` is ``set_retry(N)``, as written in KFP. The taxonomy: CONTENTION's backoff
    and PREEMPTED's count become KFP retries; TRANSIENT (and OOM remediation) stay in the
    shim. KFP retries every failure the same way, so the shim's stop marker makes a KFP
    retry of a step it gave up on exit in seconds instead of rerunning the step.
    """
    if retry.retries_any:
        w = retry.wait
        if not retry.any:
            return None
        if w is not None:  # Retry(N, wait=Backoff(...)): set_retry's own backoff
            return RetryMapping(retry.any, _seconds(w.first_s), float(w.factor), _seconds(w.max_delay_s))
        return RetryMapping(retry.any)
    b = retry.backoff
    contention = b.attempts if b else 0
    count = contention + retry.preempted + retry.timeout  # TIMEOUT retries: KFP reruns the task
    if count == 0:
        return None
    if b is not None:
        return RetryMapping(count, _seconds(b.first_s), float(b.factor), _seconds(b.max_delay_s))
    return RetryMapping(count, "0s", 1.0, "0s")


def describe_retry(m: RetryMapping | None) -> str:
    if m is None:
        return "no KFP retries"
    if m.backoff_duration in (None, "0s"):
        return f"{m.num_retries} KFP retries, at once"
    return f"{m.num_retries} KFP retries, backoff {m.backoff_duration} x{m.backoff_factor:g} (cap {m.backoff_max_duration})"


def check_durable_state(spec: PipelineSpec, opts: KfpOptions) -> None:
    """Refuse KFP retries whose run state would vanish with the pod.

    A KFP retry runs in a fresh pod. Without shared storage the shim's stop marker and the
    retry budget already spent are gone, and every retry reruns the step in full (a FATAL
    failure after a long GPU step, every backoff wait included).
    """
    if opts.durable_state is not None:
        return
    retried = [(n.name, m) for n in spec.nodes if (m := retry_mapping(spec.step_of(n.name).retry)) is not None]
    if not retried:
        return
    from interlock.core.base.errors import PipelineDefinitionError

    node, m = retried[0]
    others = f" (as have {', '.join(repr(n) for n, _ in retried[1:])})" if len(retried) > 1 else ""
    raise PipelineDefinitionError(
        f"the step has {describe_retry(m)}{others}, but the run state that stops a retry (stop markers, "
        "the retry budget spent) would live in the pod's own filesystem and vanish with it: every KFP retry "
        "would rerun the step in full",
        pipeline=spec.name, step=node,
        hint="compile with --option pipeline_root=s3://BUCKET/PATH (the run's KFP pipeline root keeps the state), "
        "--option state_store=URI, or --option state_pvc=PVC_NAME (a ReadWriteMany volume)",
    )


def container_env(spec: PipelineSpec, step: StepSpec, opts: KfpOptions) -> dict[str, str]:
    """Static env of the container: the step's env plus what the shim reads."""
    env = dict(step.env)
    # With a state volume the shim uses STATE_ROOT/runs/<run id>/state.
    env.update(RunEnv(
        retry_in_process=IN_PROCESS, state_root=Path(STATE_MOUNT) if opts.state_pvc else None,
        state_store=opts.state_store_uri, checkpoint_root=opts.checkpoint_store,
    ).to_env())
    if not opts.local_conditions:  # built for a cluster (kfp-local builds with local_conditions)
        # SIGTERM to an interruptible step is then a spot reclaim: checkpoint, PREEMPTED, retry.
        env.update(RunEnv(on_cluster=True).to_env())
    return env


def apply_task_settings(task: Any, spec: PipelineSpec, step: StepSpec, opts: KfpOptions, *, display_name: str) -> None:
    """Pipeline-spec settings: caching, retry, resources, accelerator, env."""
    task.set_display_name(display_name)
    task.set_caching_options(enable_caching=bool(opts.caching and step.cache and step.cache.enabled))
    mapping = retry_mapping(step.retry)
    if mapping:
        task.set_retry(**mapping.kwargs())
    r = step.resources
    if r.cpu:
        task.set_cpu_request(r.cpu)
    if r.cpu_limit:
        task.set_cpu_limit(r.cpu_limit)
    if r.memory:
        task.set_memory_request(r.memory)
    # A limit below the request is refused by core; without one, the request is the limit so
    # the step is not OOM-killed below what it asked for.
    if r.memory_limit or r.memory:
        task.set_memory_limit(r.memory_limit or r.memory)
    if r.gpu:
        task.set_accelerator_type(opts.accelerator_resource)
        task.set_accelerator_limit(r.gpu)
    for name, value in sorted(container_env(spec, step, opts).items()):
        task.set_env_variable(name, value)


def apply_platform_settings(task: Any, spec: PipelineSpec, step: StepSpec, opts: KfpOptions) -> None:
    """kfp-kubernetes settings (the platform spec)."""
    from kfp import kubernetes

    r = step.resources
    selectors = dict(r.node_selector)
    for k, v in accelerator_selector(step, opts).items():
        selectors.setdefault(k, v)
    tolerations = list(r.tolerations)
    if step.interruptible:
        for k, v in opts.spot_node_selector:
            selectors.setdefault(k, v)
        tolerations += [t for t in opts.spot_tolerations if t not in tolerations]
    for k, v in sorted(selectors.items()):
        kubernetes.add_node_selector(task, label_key=k, label_value=v)
    for t in tolerations:
        kubernetes.add_toleration(task, key=t.key, operator=t.operator, value=t.value, effect=t.effect)
    # Cost allocation: pipeline labels on every pod, step labels on its own.
    # Kueue's queue labels: this step's pod is admitted from its team's queue.
    for k, v in sorted({**dict(spec.labels), **dict(step.labels), **kueue_labels(r)}.items()):
        kubernetes.add_pod_label(task, label_key=k, label_value=v)
    for k, v in sorted(dict(step.annotations).items()):
        kubernetes.add_pod_annotation(task, annotation_key=k, annotation_value=v)
    by_group: dict[str, dict[str, str]] = {}
    for s in step.secrets:
        by_group.setdefault(s.group, {})[s.key] = s.env_var
    for group, keys in sorted(by_group.items()):
        kubernetes.use_secret_as_env(task, secret_name=group, secret_key_to_env=keys)
    if step.timeout_s:
        kubernetes.set_timeout(task, seconds=max(1, int(step.timeout_s)))
    if r.shared_memory:
        kubernetes.empty_dir_mount(task, volume_name="dshm", mount_path="/dev/shm", medium="Memory", size_limit=r.shared_memory)
    for pvc, path in opts.pvc_mounts:
        kubernetes.mount_pvc(task, pvc_name=pvc, mount_path=path)
    if opts.state_pvc:
        kubernetes.mount_pvc(task, pvc_name=opts.state_pvc, mount_path=STATE_MOUNT)
    if opts.run_id_from_pod_label:
        kubernetes.use_field_path_as_env(task, env_name=RUN_ID_ENV, field_path=RUN_ID_LABEL)


# What KFP cannot express, and what the adapter does instead (shown by `interlock backends`).
LOSSY = (
    "retry kinds: KFP retries every failure alike; Retry(N) is set_retry(N); with the taxonomy the shim retries "
    "TRANSIENT in-process, KFP's set_retry carries CONTENTION's backoff (+ PREEMPTED's count), and whenever the "
    "shim gives up (FATAL, a spent budget) it leaves a stop marker so KFP's retry exits in seconds",
    "retry max_total: KFP has no cap on the total wait; only the per-retry cap (backoff_max_duration) is set",
    "preemption retries wait CONTENTION's backoff on KFP (one retry policy per task)",
    "spot (interruptible): no KFP preemption handler; rendered as spot node selector + toleration + set_retry",
    "cache keys: KFP keys input artifacts by URI, not content, and cannot ignore inputs "
    "(Cache.ignore_inputs); the code fingerprint is in the component command so a code change invalidates",
    "accelerator model: KFP OSS takes a resource name (nvidia.com/gpu) and a count; the model "
    "(e.g. nvidia-h200) becomes a node selector on the accelerator label",
    "ephemeral_storage: no KFP setting; ignored",
    "Optional values: KFP has no null parameter; Optional parameters, inputs and outputs travel as JSON "
    "text in a KFP string (\"null\" for None), and an unbound input defaulting to None is not declared",
    "dicts (typed dict[str, T] too), untyped lists and anything holding one or holding a None travel as JSON text "
    "in a KFP string, not a LIST/STRUCT parameter (a protobuf Struct makes every number a double and sorts keys): "
    "a pipeline parameter of such a type is entered as JSON text in the KFP UI",
    "gate on a dataclass field: KFP conditions read whole outputs; a small selector component extracts the field",
    "pipeline outputs that are a dataclass field are not declared in the IR (KFP cannot select a field); "
    "kfp-local still returns them",
    "il.map(tolerate=...): an item's task reports success with a failed envelope, so KFP neither retries it "
    "(the shim retries every kind in-process) nor may cache it: the items of a tolerant map are never cached",
    "triggers: not part of the IR; <pipeline>.recurring.json beside it holds the recurring runs, created with "
    "`interlock triggers apply FILE --backend kfp --option host=...` (kfp.Client().create_recurring_run)",
    "run state (stop markers, receipt fragments) must outlive a pod: compile with pipeline_root=s3://... or "
    "state_store=URI (mirrored there), or state_pvc=NAME; a step with KFP retries and none of these is refused. "
    "With state_pvc a dsl.ExitHandler task also assembles the receipt, and the IR declares no pipeline outputs "
    "(KFP refuses outputs from inside an ExitHandler)",
)


def apply_receipt_settings(task: Any, spec: PipelineSpec, opts: KfpOptions) -> None:
    """The exit task that assembles the receipt: never cached, on the state volume."""
    from kfp import kubernetes

    task.set_display_name("interlock-receipt")
    task.set_caching_options(enable_caching=False)
    task.set_env_variable(EnvName.STATE_ROOT, STATE_MOUNT)
    if opts.state_pvc:
        kubernetes.mount_pvc(task, pvc_name=opts.state_pvc, mount_path=STATE_MOUNT)
    kubernetes.use_field_path_as_env(task, env_name=RUN_ID_ENV, field_path=RUN_ID_LABEL)
    for k, v in sorted(dict(spec.labels).items()):
        kubernetes.add_pod_label(task, label_key=k, label_value=v)
