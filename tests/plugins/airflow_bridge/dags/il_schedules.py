"""Parsed, not run: schedule, catchup, SLA and sensors given as operator instances.

Airflow 3.3.1's dag.test() cannot run a DAG that has a deadline alert (it looks the
alert up by a serialized dict instead of its id), so the SLA DAG is checked as parsed.
"""

from datetime import UTC, datetime, timedelta

from airflow.providers.standard.sensors.python import PythonSensor

from interlock.plugins.airflow import dag_for

dag = dag_for(
    "lp-nightly",
    dag_id="il_nightly",
    schedule="0 3 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=True,
    sla=timedelta(hours=6),
    timeout=timedelta(hours=8),
    wait_for=[
        PythonSensor(task_id="wait_features", python_callable=bool, op_args=[1]),
        PythonSensor(task_id="wait_labels", python_callable=bool, op_args=[1]),
    ],
    tags=["fraud"],
)
