"""Step policies -> flytekit task arguments: resources, accelerator, pod template, retries, cache, secrets.

Everything here is pure translation, so compile and local runs map a step identically.
Quantities stay strings: flytekit accepts ``Resources(gpu=2)`` and then fails only at
serialization.
"""

from __future__ import annotations

import datetime
from typing import Any

from flytekit import Cache as FlyteCache
from flytekit import PodTemplate, Resources
from flytekit import Secret as FlyteSecret
from flytekit.core.base_task import TaskMetadata
from flytekit.extras import accelerators as acc

from interlock.core.base.errors import PolicyError
from interlock.core.base.status import FailureKind
from interlock.core.model.policies import kueue_labels
from interlock.core.model.spec import StepSpec

PRIMARY = "primary"

# interlock accelerator names (the GKE/Flyte device label values) -> flytekit constants.
# A MIG slice is written "<device>:<profile>", e.g. "nvidia-a100:2g.10gb".
ACCELERATORS: dict[str, Any] = {
    "nvidia-a100": acc.A100,
    "nvidia-a100-40gb": acc.A100,
    "nvidia-tesla-a100": acc.A100,
    "nvidia-a100-80gb": acc.A100_80GB,
    "nvidia-h100": acc.H100,
    "nvidia-h200": acc.H200,
    "nvidia-l4": acc.L4,
    "nvidia-l4-vws": acc.L4_VWS,
    "nvidia-l40s": acc.L40S,
    "nvidia-a10g": acc.A10G,
    "nvidia-tesla-t4": acc.T4,
    "nvidia-t4": acc.T4,
    "nvidia-tesla-v100": acc.V100,
    "nvidia-v100": acc.V100,
    "nvidia-tesla-p100": acc.P100,
    "nvidia-tesla-p4": acc.P4,
    "nvidia-tesla-k80": acc.K80,
    "nvidia-tesla-m60": acc.M60,
    "nvidia-rtx-pro-6000": acc.RTX_PRO_6000,
}
_MIG_PARENTS = {acc.A100.device: acc._A100_Base, acc.A100_80GB.device: acc._A100_80GB_Base}


def accelerator(name: str) -> Any:
    """The flytekit accelerator for an interlock name; unknown names pass through as a device label."""
    device, _, partition = name.partition(":")
    base = ACCELERATORS.get(device)
    if partition:
        parent = _MIG_PARENTS.get(getattr(base, "device", device))
        if parent is None:
            raise PolicyError(
                f"accelerator {name!r}: only A100 and A100 80GB have MIG partitions on Flyte",
                hint='write e.g. "nvidia-a100:2g.10gb" or "nvidia-a100-80gb:3g.40gb"',
            )
        return parent.partitioned(partition)
    if base is None:
        return acc.GPUAccelerator(device)
    return base


def resources(step: StepSpec) -> tuple[Resources | None, Resources | None]:
    """(requests, limits) as strings. Memory and GPU limits default to the request: a pod is
    never OOM-killed below what it asked for, and Kubernetes requires GPU limit == request."""
    r = step.resources
    gpu = str(r.gpu) if r.gpu else None
    req = {"cpu": r.cpu, "mem": r.memory, "gpu": gpu, "ephemeral_storage": r.ephemeral_storage}
    lim = {"cpu": r.cpu_limit, "mem": r.memory_limit or r.memory, "gpu": gpu}
    req = {k: v for k, v in req.items() if v is not None}
    lim = {k: v for k, v in lim.items() if v is not None}
    return (Resources(**req) if req else None, Resources(**lim) if lim else None)


def pod_template(step: StepSpec) -> PodTemplate | None:
    """Node selector, tolerations, labels and annotations (what the task decorator has no field for)."""
    r = step.resources
    # Pipeline labels ride on the launch plan: Flyte puts them on every pod. Kueue's labels
    # (the step's queue) go on this step's pods only.
    labels = {**dict(step.labels), **kueue_labels(r)}
    if not (r.node_selector or r.tolerations or labels or step.annotations):
        return None
    # kubernetes takes ~1s to import: only when a step needs a pod template.
    from kubernetes.client import V1Container, V1PodSpec, V1Toleration

    tolerations = [
        V1Toleration(key=t.key, operator=t.operator, value=t.value, effect=t.effect) for t in r.tolerations
    ]
    spec = V1PodSpec(
        containers=[V1Container(name=PRIMARY)],
        node_selector=dict(r.node_selector) or None,
        tolerations=tolerations or None,
    )
    return PodTemplate(
        pod_spec=spec,
        primary_container_name=PRIMARY,
        labels=labels or None,
        annotations=dict(step.annotations) or None,
    )


def cache_version(step: StepSpec) -> str:
    # The fingerprint already folds in the explicit Cache(version=...); 16 hex chars = 64 bits.
    return step.fingerprint[:16]


def cache(step: StepSpec) -> FlyteCache | None:
    if step.cache is None or not step.cache.enabled:
        return None
    return FlyteCache(version=cache_version(step), ignored_inputs=tuple(step.cache.ignore_inputs))


def retries(step: StepSpec, in_process: frozenset[FailureKind]) -> int:
    """Flyte has one retry counter for recoverable user errors: every kind the shim hands back.

    ``Retry(N)`` is flytekit's ``retries=N`` (the shim hands every failure back, recoverable,
    until N are spent). A step that declares nothing gets ``retries=0``, as a plain @task.
    """
    rp = step.retry
    if rp.retries_any:
        return 0 if rp.retried_in_process(FailureKind.FATAL, in_process) else (rp.any or 0)
    n = 0
    if FailureKind.TRANSIENT not in in_process:
        n += rp.transient
    if FailureKind.PREEMPTED not in in_process:
        n += rp.preempted
    if FailureKind.CONTENTION not in in_process and rp.backoff is not None:
        n += rp.backoff.attempts
    if FailureKind.TIMEOUT not in in_process:
        n += rp.timeout
    return n


def secrets(step: StepSpec) -> list[FlyteSecret]:
    """Secret *requests*: Flyte injects the value at run time; only group/key are compiled."""
    return [
        FlyteSecret(group=s.group, key=s.key, mount_requirement=FlyteSecret.MountType.ENV_VAR, env_var=s.env_var)
        for s in step.secrets
    ]


def timeout(step: StepSpec) -> datetime.timedelta | None:
    return datetime.timedelta(seconds=step.timeout_s) if step.timeout_s else None


def metadata(step: StepSpec, in_process: frozenset[FailureKind], use_cache: bool = True) -> TaskMetadata:
    """What the ``@task`` decorator would put in TaskMetadata: retries, interruptible, timeout, cache."""
    c = cache(step) if use_cache else None
    return TaskMetadata(
        cache=c is not None,
        cache_version=c.version if c is not None else "",
        cache_ignore_input_vars=tuple(c.ignored_inputs) if c is not None else (),
        retries=retries(step, in_process),
        interruptible=step.interruptible or None,
        timeout=timeout(step),
    )


def task_kwargs(
    step: StepSpec,
    *,
    in_process: frozenset[FailureKind],
    cache: bool = True,
    image: str | None = None,
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for a flytekit PythonFunctionTask implementing ``step``."""
    requests, limits = resources(step)
    kw: dict[str, Any] = {
        "requests": requests,
        "limits": limits,
        "metadata": metadata(step, in_process, cache),
        "secret_requests": secrets(step) or None,
        "environment": {**dict(step.env), **(environment or {})} or None,
        "pod_template": pod_template(step),
        "docs": None,
    }
    if step.resources.accelerator:
        kw["accelerator"] = accelerator(step.resources.accelerator)
    if step.resources.shared_memory:
        kw["shared_memory"] = step.resources.shared_memory
    if step.image or image:
        kw["container_image"] = step.image or image
    return {k: v for k, v in kw.items() if v is not None}
