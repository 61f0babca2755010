"""``FlyteLaunchPlanOperator``: launch a registered Flyte launch plan and wait for it.

Idempotent across Airflow retries: the execution name is derived from the logical run
(deployment namespace, DAG, task, run id, map index, project, domain, launch plan) and
from what would be launched (the resolved launch plan version and the inputs), never from
the try number. A retry finds the execution an earlier try started and re-attaches to it
while it runs or after it succeeded; only after a terminal failure does a retry launch the
next generation. A clear after the inputs changed (new upstream data) or after a new
launch plan version was registered launches anew instead of returning old outputs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from interlock.plugins.airflow.compat import (
    AirflowException,
    AirflowFailException,
    BaseOperator,
    BaseOperatorLink,
    XCom,
    default_deferrable,
)
from interlock.plugins.airflow.hook import ExecutionMismatch, FlyteHook, LaunchResult
from interlock.plugins.airflow.names import (
    launch_plan_name,
    logical_run_key,
    sanitize_annotations,
    sanitize_labels,
)
from interlock.plugins.airflow.phases import TERMINAL, Phase
from interlock.plugins.airflow.triggers import (
    FAILED,
    SUCCESS,
    TIMEOUT,
    FlyteExecutionTrigger,
    event_payload,
)

XCOM_EXECUTION_NAME = "flyte_execution_name"
XCOM_EXECUTION = "flyte_execution"


def _seconds(value: timedelta | float | int | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class FlyteExecutionLink(BaseOperatorLink):
    """A button on the task in the Airflow UI: the execution in the Flyte console."""

    name = "Flyte execution"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        info = XCom.get_value(ti_key=ti_key, key=XCOM_EXECUTION)
        return str(info.get("url") or "") if isinstance(info, dict) else ""


class FlyteLaunchPlanOperator(BaseOperator):
    """Launch ``launch_plan`` on Flyte with ``inputs``; succeed with its outputs (also the XCom return value).

    :param launch_plan: launch plan name, or an interlock pipeline (its ``.name``). Templated.
    :param launch_plan_version: a registered version; default the newest one. Templated.
    :param inputs: launch plan inputs by name; strings are parsed into the declared scalar
        type, so ``"{{ params.epochs }}"`` works for an int input. Templated.
    :param labels: extra Kubernetes labels, e.g. cost tags ``{"team": "fraud", "cost-center": "ml-42"}``.
        Keys and values are made Kubernetes-valid. The DAG id, task id and run id are added.
    :param annotations: extra annotations (free-text values); the raw run id and try are added.
    :param project, domain: Flyte project and domain; default the connection's extras.
    :param namespace: this Airflow deployment's name (e.g. ``"staging"``), part of every
        execution name, so two deployments with the same DAG and task ids that launch into
        the same project and domain never adopt each other's executions. Default: the
        connection extra ``namespace``, else none. Templated.
    :param poll_interval: seconds between status polls.
    :param timeout: give up (and terminate the execution) after this long; None waits for ever.
    :param deferrable: wait in the triggerer or in the worker (``on_kill`` terminates); default:
        Airflow's ``[operators] default_deferrable``.
    :param retry_on_abort: an execution aborted on the Flyte side fails the task without
        Airflow retries unless this is True (someone stopped it on purpose).
    """

    template_fields: Sequence[str] = (
        "launch_plan",
        "launch_plan_version",
        "inputs",
        "labels",
        "annotations",
        "project",
        "domain",
        "namespace",
    )
    template_fields_renderers = {"inputs": "json", "labels": "json", "annotations": "json"}
    ui_color = "#e8d5f5"
    operator_extra_links = (FlyteExecutionLink(),)

    def __init__(
        self,
        *,
        launch_plan: Any,
        launch_plan_version: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        labels: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        project: str | None = None,
        domain: str | None = None,
        namespace: str | None = None,
        flyte_conn_id: str = FlyteHook.default_conn_name,
        poll_interval: float = 30.0,
        timeout: timedelta | float | None = None,
        deferrable: bool | None = None,
        retry_on_abort: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # Resolve a pipeline object now: operator attributes are serialized with the DAG.
        self.launch_plan = launch_plan_name(launch_plan)
        self.launch_plan_version = launch_plan_version
        self.inputs = dict(inputs or {})
        self.labels = dict(labels or {})
        self.annotations = dict(annotations or {})
        self.project = project
        self.domain = domain
        self.namespace = namespace
        self.flyte_conn_id = flyte_conn_id
        self.poll_interval = float(poll_interval)
        self.timeout = _seconds(timeout)
        # None: the deployment's [operators] default_deferrable, as Airflow's own providers do.
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.retry_on_abort = retry_on_abort
        self._waiting_on: str | None = None  # set while polling in the worker, for on_kill

    def get_hook(self) -> FlyteHook:
        # One hook (one gRPC channel, one OAuth2 token) per task run, not per call.
        hook = getattr(self, "_hook", None)
        if hook is None:
            hook = self._hook = FlyteHook(
                self.flyte_conn_id,
                project=self.project,
                domain=self.domain,
                namespace=self.namespace,
            )
        return hook

    # -- launch ---------------------------------------------------------------------------

    def _run_identity(self, context: Any) -> tuple[Any, str, int]:
        ti = context["ti"]
        run_id = context.get("run_id") or ti.run_id
        map_index = getattr(ti, "map_index", -1)
        return ti, run_id, -1 if map_index is None else int(map_index)

    def execution_labels(self, context: Any) -> dict[str, str]:
        ti, run_id, _ = self._run_identity(context)
        namespace = self.get_hook().namespace
        # Provenance labels come last so a user label cannot disguise where a run came from.
        return sanitize_labels(
            {
                **self.labels,
                "airflow-dag-id": ti.dag_id,
                "airflow-task-id": ti.task_id,
                "airflow-run-id": run_id,
                **({"airflow-namespace": namespace} if namespace else {}),
                "launched-by": "interlock-airflow",
            }
        )

    def execution_annotations(self, context: Any) -> dict[str, str]:
        ti, run_id, map_index = self._run_identity(context)
        return sanitize_annotations(
            {
                **self.annotations,
                "airflow/dag-id": ti.dag_id,
                "airflow/task-id": ti.task_id,
                "airflow/run-id": run_id,
                "airflow/map-index": map_index,
                "airflow/try-number": ti.try_number,
            }
        )

    def run_key(self, context: Any) -> str:
        """This task instance's logical run (``names.logical_run_key``); the hook adds the
        launch plan version and the inputs to it (``names.launch_key``)."""
        ti, run_id, map_index = self._run_identity(context)
        hook = self.get_hook()
        return logical_run_key(
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=run_id,
            map_index=map_index,
            project=hook.project,
            domain=hook.domain,
            launch_plan=self.launch_plan,
            namespace=hook.namespace,
        )

    def launch(self, context: Any) -> LaunchResult:
        """Launch or re-attach (see module doc) and record the execution in XCom."""
        ti = context["ti"]
        hook = self.get_hook()
        key = self.run_key(context)
        try:
            result = hook.launch_or_attach(
                key,
                launch_plan=self.launch_plan,
                version=self.launch_plan_version or None,
                inputs=self.inputs,
                labels=self.execution_labels(context),
                annotations=self.execution_annotations(context),
            )
        except ExecutionMismatch as exc:
            # Deterministic: every retry would derive the same name and refuse again.
            raise AirflowFailException(str(exc)) from exc
        ref = result.status.ref
        ti.xcom_push(key=XCOM_EXECUTION_NAME, value=ref.name)
        ti.xcom_push(
            key=XCOM_EXECUTION,
            value={
                **ref.as_dict(),
                "url": result.url,
                "created": result.created,
                "generation": result.generation,
                "launch_plan_version": result.version,
                "namespace": hook.namespace,
            },
        )
        return result

    def execute(self, context: Any) -> Any:
        result = self.launch(context)
        status = result.status
        ref = status.ref.as_dict()
        if status.phase in TERMINAL:  # a retry found it already finished
            kind = SUCCESS if status.phase == Phase.SUCCEEDED else FAILED
            return self._finish(event_payload(kind, ref, status.phase_name, status.message))
        deadline = None if self.timeout is None else time.time() + self.timeout
        if self.deferrable:
            self.defer(
                trigger=FlyteExecutionTrigger(
                    execution_name=status.ref.name,
                    project=status.ref.project,
                    domain=status.ref.domain,
                    flyte_conn_id=self.flyte_conn_id,
                    poll_interval=self.poll_interval,
                    deadline=deadline,
                ),
                method_name="execute_complete",
            )
        return self._finish(self._wait_here(status.ref.name, deadline))

    def _wait_here(self, name: str, deadline: float | None) -> dict[str, Any]:
        """Non-deferrable mode: poll in the worker; ``on_kill`` terminates meanwhile."""
        hook = self.get_hook()
        self._waiting_on = name
        try:
            while True:
                status = hook.get_status(name)
                ref = status.ref.as_dict()
                if status.phase in TERMINAL:
                    kind = SUCCESS if status.phase == Phase.SUCCEEDED else FAILED
                    return event_payload(kind, ref, status.phase_name, status.message)
                if deadline is not None and time.time() >= deadline:
                    hook.terminate(name, "Airflow timeout reached while waiting")
                    return event_payload(
                        TIMEOUT, ref, status.phase_name, "deadline reached; execution terminated"
                    )
                time.sleep(
                    self.poll_interval
                    if deadline is None
                    else max(0.0, min(self.poll_interval, deadline - time.time()))
                )
        finally:
            self._waiting_on = None

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> Any:
        if not event:
            raise AirflowException("the Flyte trigger returned no event")
        return self._finish(event)

    def _finish(self, event: dict[str, Any]) -> Any:
        ref = event.get("execution") or {}
        where = f"{ref.get('project')}/{ref.get('domain')}/{ref.get('name')}"
        if event.get("status") == SUCCESS:
            outputs = self.get_hook().get_outputs(ref["name"])
            self.log.info("Flyte execution %s succeeded with outputs %s", where, sorted(outputs))
            return outputs
        phase = event.get("phase")
        message = event.get("message") or "no error message from Flyte"
        if event.get("status") == TIMEOUT:
            raise AirflowException(
                f"Flyte execution {where} did not finish in {self.timeout}s: {message}"
            )
        text = f"Flyte execution {where} ended {phase}: {message}"
        if phase == Phase.ABORTED.name and not self.retry_on_abort:
            raise AirflowFailException(text)
        raise AirflowException(text)

    def on_kill(self) -> None:
        if self._waiting_on:
            self.get_hook().terminate(self._waiting_on, "Airflow task was killed")
