"""The argo backend's compile options (``--option key=value`` or ``il.compile(**options)``)."""

from __future__ import annotations

from dataclasses import dataclass

from interlock.core.backend.protocol import BackendOptions
from interlock.core.base.errors import PolicyError

KINDS = ("workflow", "template")
QUEUES = ("kueue", "volcano")
DEFAULT_IMAGE = "python:3.11-slim"


@dataclass(frozen=True)
class ArgoOptions(BackendOptions):
    """``kind``: ``workflow`` (a Workflow to ``argo submit``) or ``template`` (a WorkflowTemplate);
    a pipeline with a schedule always gives a CronWorkflow. ``image``: the steps' image (a
    step's own ``image=`` wins). ``state_pvc``: a ReadWriteMany claim mounted on every step for
    the run state (stop markers, fragments, checkpoints, the receipt); ``state_store``: an
    object-store URI for the same (s3://...). ``queue``: ``kueue`` (the queue label on each
    pod) or ``volcano`` (``schedulerName: volcano`` and the queue annotation), for steps with
    ``Resources(queue=...)``. ``memoize_configmap``: the ConfigMap that holds memoized steps
    (one per pipeline unless given; a ConfigMap holds at most 1 MiB). ``accelerator_label``:
    the node label whose value is a step's ``accelerator``. ``spot_selector``/``spot_toleration``:
    ``KEY=VALUE`` for interruptible steps. ``trainjob_runtime``: the ClusterTrainingRuntime a
    distributed step's TrainJob references."""

    kind: str = "workflow"
    image: str | None = None
    namespace: str | None = None
    service_account: str | None = None
    state_pvc: str | None = None
    state_store: str | None = None
    queue: str = "kueue"
    memoize_configmap: str | None = None
    accelerator_label: str | None = None
    spot_selector: str | None = None
    spot_toleration: str | None = None
    artifact_repository: str | None = None  # "configmap/key" of an artifactRepositoryRef
    trainjob_runtime: str = "torch-distributed"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PolicyError(f"argo option kind={self.kind!r}: one of {', '.join(KINDS)}")
        if self.queue not in QUEUES:
            raise PolicyError(f"argo option queue={self.queue!r}: one of {', '.join(QUEUES)}")
        for name in ("spot_selector", "spot_toleration"):
            value = getattr(self, name)
            if value is not None and "=" not in value:
                raise PolicyError(f"argo option {name}={value!r} must be KEY=VALUE")
        if self.artifact_repository is not None and "/" not in self.artifact_repository:
            raise PolicyError(f"argo option artifact_repository={self.artifact_repository!r} must be CONFIGMAP/KEY")
