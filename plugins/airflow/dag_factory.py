"""``dag_for``: an Airflow DAG that triggers an interlock pipeline on Flyte.

Put it in a file in the DAGs folder::

    from interlock.plugins.airflow import dag_for
    from my_team.pipelines import fraud_retrain           # or just "fraud-retrain"

    dag = dag_for(
        fraud_retrain,
        schedule="@daily",
        inputs={"snapshot": "{{ ds }}"},
        wait_for=lambda: FileSensor(task_id="wait_for_snapshot", filepath="/data/{{ ds }}/_SUCCESS"),
        labels={"team": "fraud", "cost-center": "ml-42"},
        sla=timedelta(hours=6),
    )
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from interlock.plugins.airflow.compat import AIRFLOW_3, DAG, BaseOperator
from interlock.plugins.airflow.hook import FlyteHook
from interlock.plugins.airflow.names import launch_plan_name
from interlock.plugins.airflow.operators import FlyteLaunchPlanOperator

log = logging.getLogger(__name__)

# A sensor, a list of sensors, or a zero-argument callable that builds them.
WaitFor = Any


async def log_missed_deadline(context: Any = None, **kwargs: Any) -> None:
    """Default SLA callback (Airflow 3 deadline alert): a warning in the triggerer log."""
    dag_run = (context or {}).get("dag_run") if isinstance(context, Mapping) else None
    log.warning(
        "interlock: DAG run missed its SLA: dag_id=%s run_id=%s %s",
        getattr(dag_run, "dag_id", None) or kwargs.get("dag_id"),
        getattr(dag_run, "run_id", None) or kwargs.get("run_id"),
        {k: v for k, v in kwargs.items() if k not in ("dag_id", "run_id")},
    )


def _sensors(wait_for: WaitFor, dag: Any) -> list[Any]:
    if wait_for is None:
        return []
    if callable(wait_for) and not isinstance(wait_for, BaseOperator):
        wait_for = wait_for()  # built inside `with dag:` so it joins this DAG
    ops = [wait_for] if isinstance(wait_for, BaseOperator) else list(wait_for)
    for op in ops:
        if not isinstance(op, BaseOperator):
            raise TypeError(f"wait_for must give Airflow operators (sensors), got {op!r}")
        if not op.has_dag():  # built outside any DAG: adopt it
            dag.add_task(op)
    return ops


def _deadline(sla: timedelta, callback: Any) -> Any:
    # Lazily exported by airflow.sdk (3.1+); mypy cannot see them.
    from airflow.sdk import AsyncCallback, DeadlineAlert, DeadlineReference  # type: ignore[attr-defined]

    if callback is None:
        callback = AsyncCallback(log_missed_deadline)
    elif callable(callback) and not hasattr(callback, "path"):
        callback = AsyncCallback(callback)
    # Measured from when the run was queued, so manual and scheduled runs behave alike.
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=sla, callback=callback
    )


def dag_for(
    pipeline: Any,
    *,
    schedule: Any = None,
    start_date: datetime | None = None,
    catchup: bool = False,
    wait_for: WaitFor = None,
    inputs: Mapping[str, Any] | None = None,
    dag_id: str | None = None,
    task_id: str = "run_on_flyte",
    launch_plan_version: str | None = None,
    project: str | None = None,
    domain: str | None = None,
    namespace: str | None = None,
    flyte_conn_id: str = FlyteHook.default_conn_name,
    labels: Mapping[str, Any] | None = None,
    annotations: Mapping[str, Any] | None = None,
    retries: int = 2,
    retry_delay: timedelta = timedelta(minutes=5),
    poll_interval: float = 30.0,
    timeout: timedelta | None = None,
    deferrable: bool | None = None,
    sla: timedelta | None = None,
    sla_callback: Any = None,
    dagrun_timeout: timedelta | None = None,
    max_active_runs: int = 1,
    params: Mapping[str, Any] | None = None,
    tags: Sequence[str] = (),
    default_args: Mapping[str, Any] | None = None,
    description: str | None = None,
    **dag_kwargs: Any,
) -> Any:
    """Build a DAG: optional data-arrival sensor(s) -> launch ``pipeline`` on Flyte and wait.

    :param pipeline: an interlock pipeline (its ``.name`` is the Flyte launch plan) or a launch plan name.
    :param schedule: any Airflow schedule (cron, preset, timedelta, timetable, assets).
    :param catchup: backfill missed intervals (off by default, as in Airflow 3).
    :param wait_for: a sensor, a list of sensors, or a zero-argument callable that builds them
        (called inside the DAG, so the sensors need no ``dag=``). The launch waits for all of them.
    :param inputs: launch plan inputs, templated (``{"snapshot": "{{ ds }}"}``). With ``params`` and no
        ``inputs``, every param is passed as the input of the same name.
    :param namespace: this Airflow deployment's name (``"staging"``, ``"prod"``), part of every
        execution name; default the connection extra ``namespace``. See ``FlyteLaunchPlanOperator``.
    :param sla: the run should finish within this long after it was queued. Airflow 3: a
        deadline alert calling ``sla_callback`` (default: a warning in the triggerer log);
        Airflow 2.10: the task's ``sla``.
    :param max_active_runs: one at a time by default: two trainings of one pipeline rarely make sense.
    :returns: the DAG; assign it to a module-level name in a file of the DAGs folder.
    """
    name = launch_plan_name(pipeline)
    if inputs is None and params:
        inputs = {key: f"{{{{ params.{key} }}}}" for key in params}
    args = {"retries": retries, "retry_delay": retry_delay, **(default_args or {})}
    kwargs: dict[str, Any] = dict(dag_kwargs)
    if sla is not None:
        if AIRFLOW_3:
            kwargs["deadline"] = _deadline(sla, sla_callback)
        else:  # Airflow 2.10 task-level SLA
            args["sla"] = sla
            if sla_callback is not None:
                kwargs["sla_miss_callback"] = sla_callback
    dag = DAG(
        dag_id or name,
        schedule=schedule,
        start_date=start_date,
        catchup=catchup,
        dagrun_timeout=dagrun_timeout,
        max_active_runs=max_active_runs,
        params=dict(params or {}),
        tags=sorted({"interlock", "flyte", *tags}),
        default_args=args,
        description=description or f"Trigger the interlock pipeline {name!r} on Flyte",
        **kwargs,
    )
    with dag:
        sensors = _sensors(wait_for, dag)
        launch = FlyteLaunchPlanOperator(
            task_id=task_id,
            launch_plan=name,
            launch_plan_version=launch_plan_version,
            inputs=inputs,
            labels=labels,
            annotations=annotations,
            project=project,
            domain=domain,
            namespace=namespace,
            flyte_conn_id=flyte_conn_id,
            poll_interval=poll_interval,
            timeout=timeout,
            deferrable=deferrable,
        )
        for sensor in sensors:
            sensor >> launch
    return dag
