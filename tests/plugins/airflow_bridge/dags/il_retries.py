"""Airflow retries: re-attach to a running or succeeded execution; relaunch after a failure."""

from datetime import timedelta

from airflow.sdk import DAG

from interlock.plugins.airflow.operators import FlyteLaunchPlanOperator

FAST = {"poll_interval": 0.05, "retries": 1, "retry_delay": timedelta(0)}


class CrashAfterLaunch(FlyteLaunchPlanOperator):
    """Try 1 dies right after CreateExecution, as a worker lost mid-task would."""

    def execute(self, context):
        if context["ti"].try_number == 1:
            self.launch(context)
            raise RuntimeError("simulated worker loss after launch")
        return super().execute(context)


class CrashOnResume(FlyteLaunchPlanOperator):
    """Try 1 dies when it resumes after the execution succeeded."""

    def execute_complete(self, context, event=None):
        if context["ti"].try_number == 1:
            raise RuntimeError("simulated worker loss on resume")
        return super().execute_complete(context, event)


with DAG("il_reattach_running", schedule=None):
    CrashAfterLaunch(task_id="train", launch_plan="lp-reattach", **FAST)

with DAG("il_reattach_succeeded", schedule=None):
    CrashOnResume(task_id="train", launch_plan="lp-reattach-done", **FAST)

with DAG("il_retry_after_failure", schedule=None):
    FlyteLaunchPlanOperator(task_id="train", launch_plan="lp-flaky", **FAST)
