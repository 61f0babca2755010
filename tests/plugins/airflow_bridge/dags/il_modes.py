"""Waiting in the worker (deferrable=False), a pinned version, a timeout, and a kill."""

from airflow.sdk import DAG

from interlock.plugins.airflow.operators import FlyteLaunchPlanOperator

with DAG("il_sync", schedule=None):
    FlyteLaunchPlanOperator(
        task_id="train",
        launch_plan="lp-sync",
        launch_plan_version="v1",
        deferrable=False,
        poll_interval=0.05,
    )

with DAG("il_timeout", schedule=None):
    FlyteLaunchPlanOperator(task_id="train", launch_plan="lp-hang", timeout=0.5, poll_interval=0.05)

with DAG("il_kill", schedule=None):
    FlyteLaunchPlanOperator(
        task_id="train", launch_plan="lp-kill", deferrable=False, poll_interval=0.1
    )

with DAG("il_mapped", schedule=None):
    # One execution per mapped task instance: the map index is part of the run key.
    FlyteLaunchPlanOperator.partial(
        task_id="train", launch_plan="lp-mapped", poll_interval=0.05
    ).expand(inputs=[{"snapshot": "2026-11-01"}, {"snapshot": "2026-11-02"}])
