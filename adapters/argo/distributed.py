"""A distributed step as Argo templates: a resource template that creates a Kubeflow Trainer
``TrainJob`` and waits for its end, between two small container templates.

    <node>-inputs   (only when the step reads artifacts) the task entry unpacks them onto the
                    run's volume: a resource template cannot take input artifacts
    <node>          resource: action create, setOwnerReference (the job goes with the workflow),
                    successCondition/failureCondition on the TrainJob's conditions, the step's
                    retryStrategy; its parameters substituted by Argo into the manifest
    <node>-outputs  the task entry publishes what rank 0 left on the volume as the output
                    parameters and artifacts the readers already read (a resource template has
                    no file outputs), and records the node's fragment

Argo's conditions are Kubernetes label selectors whose keys are gjson paths restricted to a
label key's characters: a query such as ``conditions.#(type=="Complete")`` fails to parse
(argoproj/argo-workflows#2288). The conditions therefore address the position at which
Kubeflow Trainer appends them: ``Suspended`` first when Kueue suspended the job, then
``Complete`` or ``Failed``. Argo ORs a failureCondition's requirements and ANDs a
successCondition's (workflow/executor/resource.go, matchConditions).
"""

from __future__ import annotations

import json
from typing import Any

from interlock.core.base.errors import PolicyError
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.policies_opt_in import Toleration
from interlock.core.model.spec import StepSpec
from interlock.plugins.pytorch.trainjob import JobKind, JobTemplate, RankEntry, job_template, render

from .names import dns
from .options import DEFAULT_IMAGE, ArgoOptions
from .policies import STATE_MOUNT, STATE_VOLUME, contract_env, key_value, retry_strategy
from .values import HASH_SUFFIX

RANK_MODULE = "interlock.adapters.argo.rank"
PATCH_MANAGER = "interlock.dev/argo"
VALUES = "argo-values"  # <state_dir>/argo-values/<node>/{in,out}: what the ranks read and write
_MARK = "@@interlock-param:{}@@"
INPUTS_ENV = "INTERLOCK_ARGO_INPUTS"  # [[kind, port], ...]; input i's text or path in INTERLOCK_ARGO_IN_<i>
INPUT_ENV = "INTERLOCK_ARGO_IN_"


def require_state_volume(spec: PipelineSpec, node: str, opts: ArgoOptions) -> None:
    """The ranks, the inputs task and the outputs task meet on the run's volume."""
    if not opts.state_pvc:
        raise PolicyError(
            f"distributed step {node!r} needs the run's volume on Argo: its TrainJob's ranks read the step's "
            "artifact inputs from it and leave the outputs there for the <node>-outputs task (a resource template "
            "has no file inputs or outputs); state_store mirrors markers and fragments only",
            pipeline=spec.name, step=node,
            hint="compile with --option state_pvc=CLAIM (a ReadWriteMany PersistentVolumeClaim in the workflow's "
            "namespace)",
        )
    step = spec.step_of(node)
    if step.resources.queue and opts.queue == "volcano":
        raise PolicyError(
            f"distributed step {node!r}: a TrainJob is gang-scheduled by its training runtime, not by a "
            "Volcano annotation on a pod", pipeline=spec.name, step=node,
            hint="compile with queue=kueue (the queue label on the TrainJob: Kueue admits it whole), or set "
            "the runtime's podGroupPolicy for Volcano",
        )


def template_of(spec: PipelineSpec, step: StepSpec, node: str, opts: ArgoOptions) -> JobTemplate:
    """The job, as compile time decides it: the step's resources per node, spot placement,
    the run's env contract (the run id is ``{{workflow.name}}``), the volume."""
    r = step.resources
    env = {e["name"]: e["value"] for e in contract_env(spec.name, opts)}
    env.update(step.env)
    selector = {opts.accelerator_label: r.accelerator} if r.gpu and r.accelerator and opts.accelerator_label else {}
    spot_selector = (key_value(opts.spot_selector),) if opts.spot_selector else ()
    spot_tolerations: tuple[Toleration, ...] = ()
    if opts.spot_toleration:
        k, v = key_value(opts.spot_toleration)
        spot_tolerations = (Toleration(key=k, operator="Equal", value=v, effect="NoSchedule"),)
    return job_template(
        spec, step, node, kind=JobKind.TRAINJOB, image=step.image or opts.image or DEFAULT_IMAGE,
        runtime=opts.trainjob_runtime, accelerator_resource="nvidia.com/gpu", accelerator_selector=selector,
        state_pvc=opts.state_pvc, state_mount=STATE_MOUNT, env=env, spot_node_selector=spot_selector,
        spot_tolerations=spot_tolerations,
    )


def conditions(t: JobTemplate) -> tuple[str, str]:
    """(successCondition, failureCondition) on the TrainJob's status conditions."""
    at = 1 if t.queue_labels else 0  # Kueue creates the job suspended: Suspended comes first
    success = f"status.conditions.{at}.type == Complete,status.conditions.{at}.status == True"
    failure = "status.conditions.0.type == Failed,status.conditions.1.type == Failed"
    return success, failure


def resource_template(
    name: str, spec: PipelineSpec, step: StepSpec, node: str, opts: ArgoOptions,
    given: list[tuple[str, str, str]], params: list[str],
) -> dict[str, Any]:
    """The resource template creating the node's TrainJob. ``given``: the rank's inputs as the
    task entry's ``--in`` triples (a parameter's value is ``{{inputs.parameters.P}}``),
    ``params``: the template's input parameters."""
    t = template_of(spec, step, node, opts)
    # The call as positional arguments and the inputs in the env: torchrun's own parser reads
    # every argument of its command line, and refuses one that abbreviates two of its options
    # (``--node``), whatever the position.
    inputs = {INPUTS_ENV: json.dumps([[kind, port] for kind, port, _ in given])}
    inputs.update({f"{INPUT_ENV}{i}": _marked(value, params) for i, (_, _, value) in enumerate(given)})
    manifest = render(
        t, entry=RankEntry(RANK_MODULE, (spec.ref or "", node, step.fingerprint), PATCH_MANAGER), run_env=inputs,
        generate_name=f"{dns(node, 24)}-", extra_labels={"interlock.dev/run-id": "{{workflow.name}}"},
    )
    success, failure = conditions(t)
    out: dict[str, Any] = {"name": name}
    if params:
        out["inputs"] = {"parameters": [{"name": p} for p in params]}
    out["resource"] = {
        "action": "create", "setOwnerReference": True, "successCondition": success,
        "failureCondition": failure, "manifest": _with_expressions(json.dumps(manifest, indent=2), params),
    }
    if (rs := job_retry_strategy(step)) is not None:
        out["retryStrategy"] = rs
    return out


def _marked(value: str, params: list[str]) -> str:
    for p in params:
        if value == f"{{{{inputs.parameters.{p}}}}}":
            return _MARK.format(p)
    return value


def _with_expressions(text: str, params: list[str]) -> str:
    """Each parameter as ``{{=toJson(...)}}`` in place of its whole JSON string: Argo writes the
    value as a JSON string literal, so quotes and newlines in it keep the manifest valid."""
    for p in params:
        text = text.replace(json.dumps(_MARK.format(p)), f"{{{{=toJson(inputs.parameters['{p}'])}}}}")
    return text


def job_retry_strategy(step: StepSpec) -> dict[str, Any] | None:
    """The step's Argo retries, as for its other templates, plus its TRANSIENT budget (a broken
    collective: the ranks cannot retry alone, the job is created again). Argo sees no exit code
    of a resource template, so there is no expression: a FATAL rank leaves the node's marker on
    the volume and the ranks of a retry exit at once on it (``rank.py``)."""
    rs = retry_strategy(step)
    transient = step.retry.transient if not step.retry.retries_any else 0
    if rs is None:
        return {"limit": transient, "retryPolicy": "Always"} if transient else None
    rs.pop("expression", None)
    rs["limit"] = int(rs["limit"]) + transient
    return rs


def small_template(name: str, spec: PipelineSpec, step: StepSpec, opts: ArgoOptions, args: list[str],
                   entry: list[str]) -> dict[str, Any]:
    """A container template of the task entry with the run's env and volume, on regular capacity."""
    return {"name": name, "container": {
        "image": step.image or opts.image or DEFAULT_IMAGE, "command": list(entry), "args": args,
        "env": contract_env(spec.name, opts), "volumeMounts": [{"name": STATE_VOLUME, "mountPath": STATE_MOUNT}],
    }}


def output_declarations(step: StepSpec, out_dir: str) -> dict[str, list[dict[str, Any]]]:
    """The outputs a node's template declares, as a container step's: a parameter per value, an
    artifact and its content hash per artifact."""
    params: list[dict[str, Any]] = []
    arts: list[dict[str, Any]] = []
    for p in step.outputs:
        if p.type.is_artifact:
            arts.append({"name": p.name, "path": f"{out_dir}/{p.name}"})
            params.append({"name": f"{p.name}{HASH_SUFFIX}", "valueFrom": {"path": f"{out_dir}/{p.name}{HASH_SUFFIX}"}})
        else:
            params.append({"name": p.name, "valueFrom": {"path": f"{out_dir}/{p.name}"}})
    return {k: v for k, v in (("parameters", params), ("artifacts", arts)) if v}
