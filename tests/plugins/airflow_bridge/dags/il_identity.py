"""Execution identity: a task re-attaches only to what it would launch now.

The tests run these DAGs several times with one logical date (one run id), as a clear
would, changing the run's conf in between; il_deploy runs in two Airflow deployments.
"""

from airflow.sdk import DAG

from interlock.plugins.airflow.names import execution_name, launch_key
from interlock.plugins.airflow.operators import FlyteLaunchPlanOperator

FAST = {"poll_interval": 0.05, "retries": 0}

with DAG("il_inputs_change", schedule=None):
    # The upstream data's id arrives through the run's conf; a clear after it changed
    # must launch on the new data, not return the old execution's outputs.
    FlyteLaunchPlanOperator(
        task_id="train",
        launch_plan="lp-inputs",
        inputs={"snapshot": "{{ dag_run.conf['snapshot'] }}"},
        **FAST,
    )

with DAG("il_version_change", schedule=None):
    FlyteLaunchPlanOperator(
        task_id="train",
        launch_plan="lp-versions",
        launch_plan_version="{{ dag_run.conf['version'] }}",
        **FAST,
    )

with DAG("il_deploy", schedule=None):  # the same DAG file in staging and in prod
    FlyteLaunchPlanOperator(
        task_id="train", launch_plan="lp-deploy", inputs={"snapshot": "2026-11-01"}, **FAST
    )

with DAG("il_deploy_arg", schedule=None):  # the operator's namespace wins over the connection's
    FlyteLaunchPlanOperator(task_id="train", launch_plan="lp-deploy-arg", namespace="canary", **FAST)


class ForeignFirst(FlyteLaunchPlanOperator):
    """Someone else created an execution, with other inputs, under the very name this task
    derives (another deployment without a namespace, a person with flytectl)."""

    def execute(self, context):
        hook = self.get_hook()
        mine = hook.prepare(self.launch_plan, None, self.inputs)
        key = launch_key(self.run_key(context), version=mine.version, inputs_sha256=mine.inputs_sha256)
        hook.create_execution(
            execution_name(key, 0), launch_plan=self.launch_plan, inputs={"snapshot": "forged"}
        )
        return super().execute(context)


with DAG("il_foreign", schedule=None):
    ForeignFirst(
        task_id="train",
        launch_plan="lp-foreign",
        inputs={"snapshot": "2026-11-01"},
        poll_interval=0.05,
        retries=1,  # a refusal is deterministic: not retried
    )
