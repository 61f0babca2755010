"""Compile side of a distributed step on KFP: the launcher task's settings and its job template.

The KFP task of a distributed step only launches and watches the job (``launcher.py``): it
gets a small CPU container on regular (not spot) capacity, since losing it deletes the job
(the job is owned by the launcher pod). The step's resources, accelerator, tolerations, node
selector and secrets go to the ranks, in the TrainJob/PyTorchJob (``trainjob.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from interlock.core.base.errors import PolicyError
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.policies import Resources
from interlock.core.model.spec import StepSpec
from interlock.plugins.pytorch.trainjob import JobKind, JobTemplate, job_template

from .component import DEFAULT_IMAGE
from .launcher import POD_NAME_ENV, POD_NAMESPACE_ENV, POD_UID_ENV
from .policies import (
    STATE_MOUNT,
    KfpOptions,
    accelerator_selector,
    apply_platform_settings,
    apply_task_settings,
    container_env,
)

LAUNCHER_RESOURCES = Resources(cpu="250m", memory="512Mi")


def job_templates(spec: PipelineSpec, opts: KfpOptions) -> dict[str, dict[str, Any]]:
    """node -> the JSON job template embedded in its launcher component (distributed nodes only)."""
    kind = JobKind.parse(opts.distributed_job)
    out: dict[str, dict[str, Any]] = {}
    for node in spec.nodes:
        step = spec.step_of(node.name)
        if step.distributed is None:
            continue
        t: JobTemplate = job_template(
            spec, step, node.name, kind=kind, image=step.image or opts.image or DEFAULT_IMAGE,
            runtime=opts.trainjob_runtime, accelerator_resource=opts.accelerator_resource,
            accelerator_selector=accelerator_selector(step, opts), state_pvc=opts.state_pvc, state_mount=STATE_MOUNT,
            env=container_env(spec, step, opts), spot_node_selector=opts.spot_node_selector,
            spot_tolerations=opts.spot_tolerations,
        )
        out[node.name] = t.to_json()
    return out


def require_state_volume(spec: PipelineSpec, opts: KfpOptions) -> None:
    """On a cluster the ranks and the launcher meet on the state volume: refuse to compile without one."""
    nodes = [n.name for n in spec.nodes if spec.step_of(n.name).distributed is not None]
    if nodes and not opts.state_pvc:
        raise PolicyError(
            f"distributed step(s) {', '.join(nodes)} need a shared state volume on KFP: the launcher task and "
            "the job's ranks exchange inputs, outputs, FATAL markers and receipt fragments on it",
            pipeline=spec.name,
            hint="compile with --option state_pvc=NAME (a ReadWriteMany PersistentVolumeClaim in the run's namespace)",
        )


def launcher_step(step: StepSpec) -> StepSpec:
    """The launcher task's own policies: the step's minus what belongs to the ranks."""
    return dataclasses.replace(step, resources=LAUNCHER_RESOURCES, interruptible=False, secrets=())


def apply_launcher_settings(task: Any, spec: PipelineSpec, step: StepSpec, opts: KfpOptions, *, display_name: str) -> None:
    from kfp import kubernetes

    small = launcher_step(step)
    apply_task_settings(task, spec, small, opts, display_name=display_name)
    apply_platform_settings(task, spec, small, opts)
    # The job is owned by this pod (garbage-collected with it) and created in its namespace.
    for env, path in ((POD_NAME_ENV, "metadata.name"), (POD_UID_ENV, "metadata.uid"), (POD_NAMESPACE_ENV, "metadata.namespace")):
        kubernetes.use_field_path_as_env(task, env_name=env, field_path=path)
