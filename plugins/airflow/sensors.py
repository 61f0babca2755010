"""``FlyteExecutionSensor``: wait for a Flyte execution someone else started.

It does not own the execution, so killing the sensor never terminates it. Typical use:
``execution_name="{{ ti.xcom_pull(task_ids='train', key='flyte_execution_name') }}"``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from interlock.plugins.airflow.compat import (
    AirflowException,
    BaseSensorOperator,
    default_deferrable,
)
from interlock.plugins.airflow.hook import FlyteHook
from interlock.plugins.airflow.phases import TERMINAL, Phase
from interlock.plugins.airflow.triggers import SUCCESS, FlyteExecutionTrigger


class FlyteExecutionSensor(BaseSensorOperator):
    """Succeeds when the execution SUCCEEDED; fails when it ended FAILED, TIMED_OUT or ABORTED."""

    template_fields: Sequence[str] = ("execution_name", "project", "domain")

    def __init__(
        self,
        *,
        execution_name: str,
        project: str | None = None,
        domain: str | None = None,
        flyte_conn_id: str = FlyteHook.default_conn_name,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.execution_name = execution_name
        self.project = project
        self.domain = domain
        self.flyte_conn_id = flyte_conn_id
        self.deferrable = default_deferrable() if deferrable is None else deferrable  # as providers

    def get_hook(self) -> FlyteHook:
        hook = getattr(self, "_hook", None)  # one channel and token for all pokes
        if hook is None:
            hook = self._hook = FlyteHook(
                self.flyte_conn_id, project=self.project, domain=self.domain
            )
        return hook

    def poke(self, context: Any) -> bool:
        status = self.get_hook().get_status(self.execution_name)
        if status.phase == Phase.SUCCEEDED:
            return True
        if status.phase in TERMINAL:
            raise AirflowException(
                f"Flyte execution {self.execution_name} ended {status.phase_name}: {status.message}"
            )
        self.log.info("Flyte execution %s is %s", self.execution_name, status.phase_name)
        return False

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):
            return None
        hook = self.get_hook()
        self.defer(
            trigger=FlyteExecutionTrigger(
                execution_name=self.execution_name,
                project=hook.project,
                domain=hook.domain,
                flyte_conn_id=self.flyte_conn_id,
                poll_interval=self.poke_interval,
                deadline=time.time() + self.timeout if self.timeout else None,
                owns_execution=False,  # a sensor never owns the execution it watches
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> None:
        if not event or event.get("status") != SUCCESS:
            event = event or {}
            raise AirflowException(
                f"Flyte execution {self.execution_name} ended {event.get('phase')}: {event.get('message')}"
            )
