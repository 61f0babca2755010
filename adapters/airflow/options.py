"""The compile and run options of ``airflow`` and ``airflow-local``."""

from __future__ import annotations

from dataclasses import dataclass

from interlock.core.backend.protocol import BackendOptions
from interlock.core.base.errors import PolicyError

OPERATORS = ("kubernetes", "taskflow")
RETRIES = ("airflow", "shim")


@dataclass(frozen=True)
class AirflowOptions(BackendOptions):
    """Compile options (``interlock compile --backend airflow --option K=V``)."""

    # kubernetes: a KubernetesPodOperator per step (the step image, interlock's task entry);
    # taskflow: a TaskFlow task running the shim in the Airflow worker (LocalExecutor, Celery).
    operator: str = "kubernetes"
    dag_id: str | None = None  # default: the pipeline's name
    # Where runs keep their state (values, fragments, markers, the cache), seen by every task:
    # a volume mounted on the workers and, with state_pvc, on every step pod.
    state_root: str = "/opt/interlock"
    state_pvc: str | None = None  # the PersistentVolumeClaim mounted at state_root in each pod
    checkpoint_store: str | None = None  # s3://... for steps without their own CheckpointPolicy(store=)
    image: str | None = None  # default image for steps without their own
    namespace: str = "default"
    image_pull_policy: str = "IfNotPresent"
    image_pull_secret: str | None = None
    # KEY=VALUE: the node label and taint of the cluster's spot nodes, for interruptible steps
    # (GKE: cloud.google.com/gke-spot=true for both; EKS: eks.amazonaws.com/capacityType=SPOT,
    # no taint). Unset: an interruptible step schedules on any node.
    spot_selector: str | None = None
    spot_toleration: str | None = None
    # Each task also waits for the one before it in plan order (trigger rule all_done): the
    # order the local backend runs steps in. airflow-local sets it; a deployment need not.
    serial: bool = False
    # airflow: CONTENTION, PREEMPTED and TIMEOUT are retried by Airflow (retries, retry_delay,
    # retry_exponential_backoff, max_retry_delay, a retry_policy), TRANSIENT by the shim in the
    # task; shim: every retry in the task (airflow-local, as the other local backends).
    retries: str = "airflow"
    # The pipeline's triggers as the DAG's schedule (schedule.py); False: unscheduled, as
    # airflow-local's DAG, which dag.test() runs once (interlock watch starts its runs).
    schedule: bool = True

    def __post_init__(self) -> None:
        if self.retries not in RETRIES:
            raise PolicyError(f"airflow: retries={self.retries!r} is not one of {', '.join(RETRIES)}")
        if self.operator not in OPERATORS:
            raise PolicyError(f"airflow: operator={self.operator!r} is not one of {', '.join(OPERATORS)}",
                              hint="--option operator=kubernetes (pods) or operator=taskflow (the worker)")
        for name in ("spot_selector", "spot_toleration"):
            value = getattr(self, name)
            key, _, label = (value or "").partition("=")
            if value is not None and not (key and label):
                raise PolicyError(f"airflow: {name}={value!r} must be KEY=VALUE",
                                  hint=f"e.g. --option {name}=cloud.google.com/gke-spot=true")


@dataclass(frozen=True)
class AirflowLocalOptions(BackendOptions):
    """Run options of ``airflow-local`` (``interlock run --backend airflow-local --option K=V``)."""

    airflow_log: bool = False  # relay Airflow's own log lines (dag.test's), not only the steps'
