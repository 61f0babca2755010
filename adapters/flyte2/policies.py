"""Step policies as the `flyte` SDK's objects, written as Python source for the generated module.

Each function returns the text of an expression (``flyte.Resources(...)``), so that the
module a user deploys says in plain SDK code what each task gets. Environments group the
steps that share what only a ``TaskEnvironment`` can carry (image, resources, secrets,
environment variables); the rest (retries, cache, timeout, interruptible, pod template) is
per task.
"""

from __future__ import annotations

from typing import Any

from interlock.core.base.errors import CapabilityError
from interlock.core.base.status import FailureKind
from interlock.core.model.policies import kueue_labels
from interlock.core.model.spec import StepSpec

# interlock accelerator names (GKE's node label values) -> the SDK's GPU types. A MIG
# partition is written "<device>:<profile>", e.g. "nvidia-h200:1g.18gb".
GPU_TYPES = {
    "nvidia-a100": "A100", "nvidia-a100-40gb": "A100", "nvidia-tesla-a100": "A100", "nvidia-a100-80gb": "A100_80G",
    "nvidia-h100": "H100", "nvidia-h100-80gb": "H100", "nvidia-h100-mega-80gb": "H100",
    "nvidia-h200": "H200", "nvidia-h200-141gb": "H200", "nvidia-b200": "B200",
    "nvidia-l4": "L4", "nvidia-l40s": "L40s", "nvidia-a10g": "A10G", "nvidia-a10": "A10",
    "nvidia-tesla-t4": "T4", "nvidia-t4": "T4", "nvidia-tesla-v100": "V100", "nvidia-v100": "V100",
    "nvidia-rtx-pro-6000": "RTX_PRO_6000",
}
# Retry time in the shim's own timer first: the platform's bound is a backstop past it.
TIMEOUT_MARGIN_S = 60


def gpu(step: StepSpec) -> str | None:
    r = step.resources
    if not r.gpu:
        return None
    if not r.accelerator:
        return str(r.gpu)
    device, _, part = r.accelerator.partition(":")
    kind = GPU_TYPES.get(device)
    if kind is None:
        raise CapabilityError(
            f"backend 'flyte2' has no GPU type for accelerator {r.accelerator!r}", step=step.name,
            hint=f"use one of {', '.join(sorted(GPU_TYPES))} (a MIG partition as 'nvidia-h200:1g.18gb')",
        )
    if r.gpu > 8:
        raise CapabilityError(f"backend 'flyte2': gpu={r.gpu} is more than the 8 devices the SDK allows per task",
                              step=step.name, hint="use at most 8 GPUs per step")
    if part:
        return f"flyte.GPU({kind!r}, {r.gpu}, partition={part!r})"
    return repr(f"{kind}:{r.gpu}")


def resources(step: StepSpec) -> str | None:
    r = step.resources
    kw: dict[str, str] = {}
    if r.cpu is not None:
        kw["cpu"] = repr((str(r.cpu), str(r.cpu_limit))) if r.cpu_limit is not None else repr(str(r.cpu))
    memory_limit = r.memory_limit or r.memory  # a limit below the request would OOM-kill the step
    if r.memory is not None:
        kw["memory"] = repr((r.memory, memory_limit)) if memory_limit != r.memory else repr(r.memory)
    g = gpu(step)
    if g is not None:
        kw["gpu"] = g
    if r.ephemeral_storage:
        kw["disk"] = repr(r.ephemeral_storage)
    if r.shared_memory:
        kw["shm"] = repr(r.shared_memory)
    if not kw:
        return None
    return "flyte.Resources(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")"


def secrets(step: StepSpec) -> str | None:
    """Secret *requests*: the cluster injects the value; only group/key are written."""
    if not step.secrets:
        return None
    items = [f"flyte.Secret(key={s.key!r}, group={s.group!r}, as_env_var={s.env_var!r})" for s in step.secrets]
    return "[" + ", ".join(items) + "]"


def env_key(step: StepSpec, image: str | None) -> tuple[Any, ...]:
    """What makes two steps need two environments (a distributed step's plugin config too)."""
    from .distributed import plugin_config

    return (step.image or image, resources(step), secrets(step), tuple(step.env), plugin_config(step))


def retries(step: StepSpec, in_process: frozenset[FailureKind]) -> str | None:
    """One RetryStrategy per task: the budget of every kind the shim hands back, paced by the
    CONTENTION backoff when the step has one (Flyte 2 applies it between user retries)."""
    rp = step.retry
    if rp.retries_any:
        n = rp.any or 0
    else:
        n = sum(budget for kind, budget in (
            (FailureKind.TRANSIENT, rp.transient), (FailureKind.PREEMPTED, rp.preempted),
            (FailureKind.TIMEOUT, rp.timeout),
            (FailureKind.CONTENTION, rp.backoff.attempts if rp.backoff is not None else 0),
        ) if kind not in in_process)
    if not n:
        return None
    if rp.retries_any:  # Retry(N, wait=Backoff(...)): Flyte 2's own backoff between the N retries
        b = rp.wait if not rp.retried_in_process(FailureKind.FATAL, in_process) else None
    else:
        b = rp.backoff if FailureKind.CONTENTION not in in_process else None
    if b is None or not b.attempts:
        return f"flyte.RetryStrategy({n})"
    cap = f", cap=timedelta(seconds={b.max_delay_s!r})" if b.factor > 1 else ""
    return (f"flyte.RetryStrategy({n}, backoff=flyte.Backoff(base=timedelta(seconds={b.first_s!r}), "
            f"factor={float(b.factor)!r}{cap}))")


def cache(step: StepSpec, mapped: bool = False) -> str | None:
    """Cache(version_override=<code fingerprint>): the inputs Flyte hashes are interlock's
    content hashes (values.py). Behaviour "auto", not "override": with a version given the
    SDK uses it either way, and its local mode reads its cache only for "auto". ``mapped``:
    the task of a map, whose ``node`` input names the item (no input of the step)."""
    if step.cache is None or not step.cache.enabled:
        return None
    ignored = (*(("node",) if mapped else ()), *step.cache.ignore_inputs)
    return (f"flyte.Cache('auto', version_override={step.fingerprint[:16]!r}"
            + (f", ignored_inputs={ignored!r})" if ignored else ")"))


def timeout(step: StepSpec) -> str | None:
    if step.timeout_s is None:
        return None
    return f"flyte.Timeout(max_runtime=timedelta(seconds={step.timeout_s + TIMEOUT_MARGIN_S!r}))"


def pod_template(step: StepSpec) -> str | None:
    """Node selector, tolerations, labels, annotations and Kueue's labels (the step's queue):
    what the task has no field of its own for."""
    r = step.resources
    labels = {**dict(step.labels), **kueue_labels(r)}
    if not (r.node_selector or r.tolerations or labels or step.annotations):
        return None
    tolerations = ", ".join(
        f"V1Toleration(key={t.key!r}, operator={t.operator!r}, value={t.value!r}, effect={t.effect!r})"
        for t in r.tolerations
    )
    spec = (f"V1PodSpec(containers=[V1Container(name='primary')], node_selector={dict(r.node_selector) or None!r}, "
            f"tolerations={f'[{tolerations}]' if tolerations else None})")
    return (f"flyte.PodTemplate(pod_spec={spec}, primary_container_name='primary', labels={labels or None!r}, "
            f"annotations={dict(step.annotations) or None!r})")


def task_kwargs(step: StepSpec, in_process: frozenset[FailureKind], mapped: bool = False) -> dict[str, str]:
    """The ``@env.task(...)`` arguments of a step, as source text (``mapped``: a map's task)."""
    kw = {
        "retries": retries(step, in_process),
        "cache": cache(step, mapped),
        "timeout": timeout(step),
        "interruptible": "True" if step.interruptible else None,
        "pod_template": pod_template(step),
    }
    return {k: v for k, v in kw.items() if v is not None}
