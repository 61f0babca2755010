"""FlyteExecutionSensor on executions started elsewhere: deferred, then success or failure."""

from airflow.sdk import DAG

from interlock.plugins.airflow import FlyteExecutionSensor

with DAG("il_watch", schedule=None):
    FlyteExecutionSensor(
        task_id="watch_ok",
        execution_name="watch-ok",
        deferrable=True,
        poke_interval=0.05,
        timeout=30,
    )
    FlyteExecutionSensor(
        task_id="watch_fail",
        execution_name="watch-fail",
        deferrable=True,
        poke_interval=0.05,
        timeout=30,
    )
    FlyteExecutionSensor(
        task_id="watch_poke", execution_name="watch-poke", poke_interval=0.05, timeout=30
    )
