"""A step's policies as the fields of its Argo template: retries (``retryStrategy`` with an
exit-code expression and CONTENTION's backoff), the timeout, resources and GPUs, node
selectors, tolerations, ``/dev/shm``, labels and the queue, secrets, and the cache (``memoize``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from interlock.core.base.status import FailureKind
from interlock.core.model.backoff import Backoff
from interlock.core.model.policies import kueue_labels
from interlock.core.model.spec import StepSpec
from interlock.core.run.env import EnvName, RunEnv

from .exit_codes import retry_expression
from .options import ArgoOptions

# Retried at once by the shim inside the pod: TRANSIENT (a connection reset), so a retry costs
# no new pod; what needs a wait or a new node goes back to Argo.
IN_PROCESS = frozenset({FailureKind.TRANSIENT})
STATE_MOUNT = "/interlock-state"
SHM_VOLUME = "dshm"
STATE_VOLUME = "interlock-state"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def _seconds(s: float) -> str:
    return f"{int(s)}s" if float(s).is_integer() else f"{s}s"


def retry_strategy(step: StepSpec) -> dict[str, Any] | None:
    """Argo's retries for the step's policy. ``Retry(N)`` is ``limit: N`` for every failure, as
    an Argo user writes it. The taxonomy: CONTENTION's backoff, PREEMPTED's and TIMEOUT's
    counts become Argo retries, allowed by the expression only for those kinds' exit codes (a
    FATAL exit gets no retry pod); TRANSIENT stays in the shim. Argo has one backoff per
    template, so a PREEMPTED retry of a step with a contention backoff waits it too."""
    r = step.retry
    if r.retries_any:
        if not r.any:
            return None
        out_any: dict[str, Any] = {"limit": r.any, "retryPolicy": "Always"}
        if r.wait is not None:  # Retry(N, wait=Backoff(...)): Argo waits between the N retries
            out_any["backoff"] = _backoff(r.wait)
        return out_any
    b = r.backoff
    kinds = {k for k, n in ((FailureKind.CONTENTION, b.attempts if b else 0), (FailureKind.PREEMPTED, r.preempted),
                            (FailureKind.TIMEOUT, r.timeout)) if n}
    if not kinds:
        return None
    out: dict[str, Any] = {
        "limit": (b.attempts if b else 0) + r.preempted + r.timeout,
        "retryPolicy": "Always",
        "expression": retry_expression(frozenset(kinds)),
    }
    if b is not None and b.attempts:
        out["backoff"] = _backoff(b)
    return out


def _backoff(b: Backoff) -> dict[str, Any]:
    out = {"duration": _seconds(b.first_s), "factor": _factor(b.factor), "cap": _seconds(b.max_delay_s)}
    if b.max_total_s is not None:
        out["maxDuration"] = _seconds(b.max_total_s)
    return out


def _factor(f: float) -> int | str:
    return int(f) if float(f).is_integer() else str(f)  # IntOrString: Argo parses "1.5"


def _resources(step: StepSpec) -> dict[str, Any]:
    r = step.resources
    req: dict[str, str] = {}
    lim: dict[str, str] = {}
    for name, value, limit in (("cpu", r.cpu, r.cpu_limit), ("memory", r.memory, r.memory_limit or r.memory),
                               ("ephemeral-storage", r.ephemeral_storage, None)):
        if value is not None:
            req[name] = str(value)
        if limit is not None:
            lim[name] = str(limit)
    if r.gpu:
        req["nvidia.com/gpu"] = lim["nvidia.com/gpu"] = str(r.gpu)
    return {k: v for k, v in (("requests", req), ("limits", lim)) if v}


def key_value(text: str) -> tuple[str, str]:
    """A KEY=VALUE option (spot_selector, spot_toleration) as its two halves."""
    k, _, v = text.partition("=")
    return k, v


def contract_env(spec_name: str, opts: ArgoOptions) -> list[dict[str, Any]]:
    """The run's env contract in every pod: the run id is the workflow's name (stable across
    Argo's retries, so markers and checkpoints carry over), the state on the volume or store."""
    env: list[dict[str, Any]] = [{"name": EnvName.RUN_ID, "value": "{{workflow.name}}"}]
    if opts.state_pvc:
        env.append({"name": EnvName.STATE_ROOT, "value": STATE_MOUNT})
    contract = RunEnv(pipeline=spec_name, backend="argo", retry_in_process=IN_PROCESS, on_cluster=True,
                      state_store=opts.state_store).to_env()
    return env + [{"name": k, "value": v} for k, v in contract.items()]


def step_env(spec_name: str, step: StepSpec, opts: ArgoOptions) -> list[dict[str, Any]]:
    """The env contract (the run is the workflow: its name is stable across retries), the
    step's own variables, and each secret as a ``secretKeyRef`` (never its value)."""
    env = contract_env(spec_name, opts)
    env += [{"name": k, "value": v} for k, v in step.env]
    env += [{"name": s.env_var,
             "valueFrom": {"secretKeyRef": {"name": s.group, "key": s.key}}} for s in step.secrets]
    return env


def apply_step(template: dict[str, Any], spec_name: str, step: StepSpec, opts: ArgoOptions,
               pipeline_labels: dict[str, str]) -> None:
    """Set the template's fields for ``step``'s policies (its ``container`` is already there)."""
    c = template["container"]
    c["env"] = step_env(spec_name, step, opts)
    res = _resources(step)
    if res:
        c["resources"] = res
    if (rs := retry_strategy(step)) is not None:
        template["retryStrategy"] = rs
    if step.timeout_s:
        template["activeDeadlineSeconds"] = int(step.timeout_s) + 30  # the shim's own timer fires first
    r = step.resources
    selector = dict(r.node_selector)
    tolerations = [{k: v for k, v in asdict(t).items() if v is not None} for t in r.tolerations]
    if r.gpu and r.accelerator and opts.accelerator_label:
        selector[opts.accelerator_label] = r.accelerator
    if step.interruptible:
        if opts.spot_selector:
            selector.update([key_value(opts.spot_selector)])
        if opts.spot_toleration:
            k, v = key_value(opts.spot_toleration)
            tolerations.append({"key": k, "operator": "Equal", "value": v, "effect": "NoSchedule"})
    if selector:
        template["nodeSelector"] = selector
    if tolerations:
        template["tolerations"] = tolerations
    volumes, mounts = [], []
    if r.shared_memory:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": r.shared_memory}})
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if opts.state_pvc:
        mounts.append({"name": STATE_VOLUME, "mountPath": STATE_MOUNT})
    if volumes:
        template["volumes"] = volumes
    if mounts:
        c["volumeMounts"] = mounts
    labels = {**pipeline_labels, **dict(step.labels)}
    annotations = dict(step.annotations)
    if r.queue and opts.queue == "kueue":
        labels.update(kueue_labels(r))
    elif r.queue:
        template["schedulerName"] = "volcano"
        annotations[VOLCANO_QUEUE_ANNOTATION] = r.queue
        if r.priority_class:
            template["priorityClassName"] = r.priority_class
    meta = {k: v for k, v in (("labels", labels), ("annotations", annotations)) if v}
    if meta:
        template["metadata"] = meta


def memoize(spec_name: str, step: StepSpec, key_parts: list[str], opts: ArgoOptions) -> dict[str, Any] | None:
    """The cache as ``memoize``: the key is the step's code fingerprint (which its cache version
    feeds) and a hash of the inputs' texts and artifact hashes (``key_parts``, Argo expressions),
    as interlock's own cache key. An entry holds the outputs' parameters and artifact
    references; a ConfigMap holds at most 1 MiB, so large parameter outputs fill it quickly."""
    if step.cache is None or not step.cache.enabled:
        return None
    digest = f"sprig.sha256sum(toJson([{', '.join(key_parts)}]))" if key_parts else "''"
    return {
        "key": f"{step.fingerprint[:16]}-{{{{={digest}}}}}",
        "maxAge": "",  # Argo: empty, the entries never expire (interlock's cache has no age)
        "cache": {"configMap": {"name": opts.memoize_configmap or f"interlock-cache-{spec_name}"[:253]}},
    }
