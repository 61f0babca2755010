"""The Airflow operator of each kind of task, in the form the compile option ``operator`` says:
``taskflow`` (a TaskFlow task that runs the shim in the Airflow worker: LocalExecutor,
CeleryExecutor, airflow-local) or ``kubernetes`` (a KubernetesPodOperator per step running
the step image with interlock's task entry, ``pod.py``). Gate tasks are TaskFlow in both:
they only read values from the run's folder.

The task bodies below import ``worker.py`` (the shim and its imports) when a task runs, never
while the scheduler parses the DAG file.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from interlock.core.model.joins import AIRFLOW, DEFAULT, RunIf
from interlock.core.model.pipeline_spec import Node, PipelineSpec

from .names import COLLECT, ITEMS, gate_task_id, task_id

ALL_DONE = "all_done"
ONE_BRANCH = "none_failed_min_one_success"  # a reader of il.branch_value: one branch ran, none failed


def _worker(spec_file: str) -> Any:
    from airflow.sdk import get_current_context

    from .loader import compiled
    from .names import RunPlace
    from .schedule import context_params
    from .worker import Worker

    spec, options = compiled(spec_file)
    ctx = get_current_context()
    return Worker(spec, RunPlace.here(options, ctx["run_id"]), context_params(spec, ctx))


def _airflow_outcome(fn: Any) -> Any:
    """What the worker decided, said to Airflow: a node that does not start is a skipped task, a
    failed or stopped node a failed task that Airflow does not retry (the shim decided)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from .worker import Failed, Skip

    try:
        return fn()
    except Skip as skip:
        raise AirflowSkipException(f"{skip.status}: {skip.why}") from None
    except Failed as failed:
        if failed.retry_delay is not None:  # retries="airflow": ShimRetryPolicy waits the step's backoff
            from .retries import StepRetry

            raise StepRetry(failed.kind, failed.detail, failed.retry_delay) from failed.__cause__
        raise AirflowFailException(f"the step {failed}; see its interlock fragment") from failed.__cause__


def run_step(spec_file: str, node: str) -> str:
    return _airflow_outcome(lambda: _worker(spec_file).step_task(node))


def map_items(spec_file: str, node: str) -> list[int]:
    return _airflow_outcome(lambda: _worker(spec_file).map_items(node))


def map_pod_args(spec_file: str, node: str) -> list[list[str]]:
    """The item indices as the pods' entry arguments (KubernetesPodOperator expands over them)."""
    return [["item", node, str(i)] for i in map_items(spec_file, node)]


def map_item(spec_file: str, node: str, index: int) -> str:
    return _airflow_outcome(lambda: _worker(spec_file).map_item(node, index))


def map_collect(spec_file: str, node: str) -> str:
    return _airflow_outcome(lambda: _worker(spec_file).map_collect(node))


def run_finally(spec_file: str, node: str) -> None:
    return _airflow_outcome(lambda: _worker(spec_file).finally_task(node))


def gate_holds(spec_file: str, gate: str) -> bool:
    return bool(_worker(spec_file).gate_holds(gate))


class Operators:
    def __init__(self, spec: PipelineSpec, options: dict[str, Any], spec_file: str):
        self.spec, self.options, self.spec_file = spec, options, spec_file
        self.pods = options.get("operator", "taskflow") == "kubernetes"
        self.serial = bool(options.get("serial", False))

    def _rule(self, node: Node) -> str:
        if self.serial:
            return ALL_DONE  # each task decides itself from the run state (loader.py)
        if node.run_if is not None:  # a join rule: Airflow's own trigger rule
            return AIRFLOW[RunIf(node.run_if)]
        if any(b.kind == "one_of" for _, b in node.inputs):
            return ONE_BRANCH
        # interlock's default rule, none_failed: a skipped upstream (a closed block, il.Skip) does
        # not skip the task; the worker skips it when it reads a value that was never made.
        return AIRFLOW[DEFAULT]

    def _common(self, node: Node) -> dict[str, Any]:
        step = self.spec.step_of(node)
        kw: dict[str, Any] = {"retries": 0}  # retries="shim": the shim retries every kind in the task
        if self.options.get("retries", "airflow") == "airflow":
            from .retries import retry_settings

            # A pod's exit code does not say the failure's kind: the shim's stop marker ends a
            # retry it would not grant in seconds; a TaskFlow task tells ShimRetryPolicy the kind.
            kw.update(retry_settings(step, policy=not self.pods))
        if step.timeout_s is not None and self.pods:
            # The pod runs the shim for one attempt at a time (pod.py): Airflow's own timeout is
            # the backstop of the shim's timer. In a TaskFlow task the shim retries in the worker,
            # so the attempts and their backoff would count against one execution_timeout.
            kw["execution_timeout"] = timedelta(seconds=step.timeout_s + 60)
        return kw

    def step_task(self, node: Node) -> Any:
        if self.pods:
            from .pod import pod_task

            return pod_task(self.spec, node, self.options, "step", task_id(node.name), self._rule(node),
                            self._common(node))
        from airflow.sdk import task

        return task(task_id=task_id(node.name), trigger_rule=self._rule(node), **self._common(node))(run_step)(
            self.spec_file, node.name)

    def map_tasks(self, node: Node) -> tuple[Any, Any]:
        from airflow.sdk import task

        assert node.map is not None
        items = task(task_id=task_id(node.name + ITEMS), trigger_rule=self._rule(node))(
            map_pod_args if self.pods else map_items)(self.spec_file, node.name)
        limit = {"max_active_tis_per_dag": node.map.concurrency} if node.map.concurrency else {}
        if self.pods:
            from .pod import pod_map_task

            mapped = pod_map_task(self.spec, node, self.options, task_id(node.name), items, {**self._common(node), **limit})
        else:
            mapped = task(task_id=task_id(node.name), **self._common(node), **limit)(map_item).partial(
                spec_file=self.spec_file, node=node.name).expand(index=items)
        collect = task(task_id=task_id(node.name + COLLECT), trigger_rule=ALL_DONE)(map_collect)(
            self.spec_file, node.name)
        mapped >> collect
        items >> collect  # decided before the items (skipped, not run): collect says so
        return items, collect

    def finally_task(self, node: Node) -> Any:
        if self.pods:
            from .pod import pod_task

            return pod_task(self.spec, node, self.options, "finally", task_id(node.name), ALL_DONE, self._common(node))
        from airflow.sdk import task

        return task(task_id=task_id(node.name), trigger_rule=ALL_DONE, **self._common(node))(run_finally)(
            self.spec_file, node.name)

    def gate_task(self, gate_id: str) -> Any:
        from airflow.sdk import task

        return task.short_circuit(task_id=gate_task_id(gate_id), ignore_downstream_trigger_rules=False,
                                  trigger_rule=ALL_DONE if self.serial else "all_success")(gate_holds)(
            self.spec_file, gate_id)
