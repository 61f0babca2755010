"""PipelineSpec -> registrable Flyte protobufs (what ``pyflyte package`` writes).

The files are named like pyflyte's (``<n>_<name>_<1|2|3>.pb`` for task, workflow, launch
plan), so ``flytectl register files --archive`` of a tarball of them, or ``flytectl register
files DIR/*.pb --version V``, registers the pipeline. The workflow and its default launch
plan are registered under the pipeline's own name (the Airflow bridge starts it by that name).
"""

from __future__ import annotations

import tarfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.core.launch_plan import LaunchPlan
from flytekit.models.common import Labels
from flytekit.tools.serialize_helpers import (
    _should_register_with_admin,
    persist_registrable_entities,
)
from flytekit.tools.translator import get_serializable

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.base.status import FailureKind
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.run.env import RunEnv

from .resolver import check_ref
from .schedules import scheduled_plans
from .tasks import CLUSTER_IN_PROCESS, TaskOptions
from .workflow import Entities, build_entities


def _fresh_launch_plan(name: str, **kw: Any) -> LaunchPlan:
    # LaunchPlan.CACHE is process-global; compiling twice in one process must not collide.
    LaunchPlan.CACHE.pop(name, None)
    return LaunchPlan.create(name, **kw)


def launch_plans(entities: Entities, image: str | None = None) -> list[LaunchPlan]:
    """The default launch plan (pipeline defaults, no schedule) and one per time trigger
    (``image``: the tasks' image, for a trigger's kickoff task).

    Each schedule lives on its own launch plan so that activating it is a deliberate act
    (``flytectl update launchplan --activate``) and the default one stays a plain trigger.
    """
    spec, wf = entities.spec, entities.workflow
    labels = Labels(dict(spec.labels)) if spec.labels else None
    return [_fresh_launch_plan(spec.name, workflow=wf, labels=labels),
            *scheduled_plans(entities, _fresh_launch_plan, labels, image)]


def settings(project: str, domain: str, version: str, image: str) -> SerializationSettings:
    img = Image.look_up_image_info("default", image)
    return SerializationSettings(
        image_config=ImageConfig(default_image=img, images=[img]),
        project=project, domain=domain, version=version,
    )


def serialize(
    spec: PipelineSpec,
    *,
    project: str,
    domain: str,
    version: str,
    image: str,
    in_process: frozenset[FailureKind] = CLUSTER_IN_PROCESS,
    echo_else: bool = False,
    checkpoint_store: str | None = None,
) -> list[Any]:
    """The registrable protobuf models (TaskSpec, WorkflowSpec, LaunchPlan), in dependency order."""
    check_ref(spec)
    # A run-level checkpoint store (s3://...) reaches every task container through the env contract.
    env = RunEnv(checkpoint_root=checkpoint_store).to_env()
    entities = build_entities(spec, TaskOptions(image=image, in_process=in_process, echo_else=echo_else,
                                                environment=env))
    ss = settings(project, domain, version, image)
    mapping: OrderedDict[Any, Any] = OrderedDict()
    get_serializable(mapping, ss, entities.workflow)
    for lp in launch_plans(entities, image):
        get_serializable(mapping, ss, lp)
    return [m for m in mapping.values() if _should_register_with_admin(m)]


def compile_to(
    spec: PipelineSpec,
    out: str | Path,
    *,
    project: str | None = None,
    domain: str | None = None,
    version: str | None = None,
    image: str | None = None,
    archive: bool = True,
    echo_else: bool = False,
    checkpoint_store: str | None = None,
    **_: Any,
) -> list[Path]:
    """Write the protobufs into ``out`` (a directory) and, with ``archive``, ``out/flyte-package.tgz``.

    As ``pyflyte package``: project, domain and version stay empty unless given, so that
    ``flytectl register files -p P -d D --version V flyte-package.tgz`` fills them.
    """
    if not image:
        raise PipelineDefinitionError(
            "compiling for Flyte needs the task image", pipeline=spec.name,
            hint="pass --image registry/team/image:tag (an image with interlock and the pipeline's code installed)",
        )
    archive, echo_else = _flag(archive), _flag(echo_else)  # `--option k=v` arrives as text
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.pb"):
        old.unlink()
    models = serialize(spec, project=project or "", domain=domain or "", version=version or "", image=image,
                       echo_else=echo_else, checkpoint_store=checkpoint_store or None)
    persist_registrable_entities(models, str(out))
    files = sorted(out.glob("*.pb"))
    if archive:
        tgz = out / "flyte-package.tgz"
        with tarfile.open(tgz, "w:gz") as tar:
            for f in files:
                tar.add(f, arcname=f.name)
        files.append(tgz)
    return files


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
