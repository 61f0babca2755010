"""Happy path: data sensor -> launch (templated inputs, labels) -> outputs used downstream.

The launch plan is given as a pipeline-like object (anything with ``.name``).
"""

import os
from types import SimpleNamespace

from airflow.providers.standard.operators.python import PythonOperator
from airflow.providers.standard.sensors.python import PythonSensor

from interlock.plugins.airflow import FlyteExecutionSensor, dag_for

fraud_retrain = SimpleNamespace(name="lp-success")  # stands in for an interlock pipeline


def _data_arrived() -> bool:
    return os.path.exists(os.environ["IL_TEST_MARKER"])


def _double_auc(ti):
    return ti.xcom_pull(task_ids="run_on_flyte")["auc"] * 2


dag = dag_for(
    fraud_retrain,
    dag_id="il_success",
    schedule="@daily",
    params={"epochs": 3},
    inputs={"snapshot": "{{ ds }}", "epochs": "{{ params.epochs }}", "lr": 0.01},
    labels={"team": "Fraud Detection", "cost-center": "ml/42", "airflow-dag-id": "spoofed"},
    annotations={"owner": "fraud team <fraud@example.com>"},
    wait_for=lambda: PythonSensor(
        task_id="wait_for_data",
        python_callable=_data_arrived,
        poke_interval=0.1,
        timeout=30,
        mode="poke",
    ),
    poll_interval=0.05,
    retries=0,
    tags=["fraud"],
)

with dag:
    use = PythonOperator(task_id="use_auc", python_callable=_double_auc)
    watch = FlyteExecutionSensor(
        task_id="watch",
        execution_name="{{ ti.xcom_pull(task_ids='run_on_flyte', key='flyte_execution_name') }}",
        deferrable=True,
        poke_interval=0.05,
        timeout=30,
    )
    dag.task_dict["run_on_flyte"] >> [use, watch]
