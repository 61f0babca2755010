"""The two Airflow backends: ``airflow`` (compile a DAG file for an Airflow 3 deployment) and
``airflow-local`` (compile, then run it with real Airflow's ``dag.test()``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import BackendOptions, Capabilities, RunOptions
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult

from .dag_file import write_dag
from .names import BACKEND, LOCAL_BACKEND
from .options import AirflowLocalOptions, AirflowOptions

# Without Airflow the capabilities would load and the backend fail later with a raw
# ModuleNotFoundError: failing here lets discovery name the extra to install.
if importlib.util.find_spec("airflow") is None:
    raise ImportError("No module named 'airflow'", name="airflow")

_DECIDES = "each task first decides from the run state whether its node starts (worker.py)"

_FEATURES = {
    "gates": "native (a short-circuit task <gate>.when before each il.when block: a closed gate skips the "
    "block's tasks; " + _DECIDES + ")",
    "condition.expression": "native (evaluated by the gate task on the run's values)",
    "condition.or": "native (evaluated by the gate task)",
    "branch.chain": "native (one short-circuit task per block of the chain, each on its own effective condition)",
    "branch.value": "native (the reader's trigger rule none_failed_min_one_success; the value of the branch "
    "that ran, read from the run state)",
    "map": "native (dynamic task mapping: <node>.items counts the list, <node>.expand(index=...) runs one "
    "mapped task instance per item through the shim, max_active_tis_per_dag=concurrency, and <node>.collect "
    "(all_done) folds the items)",
    "map.tolerate": "native (<node>.collect, trigger rule all_done, counts the failed items against the "
    "tolerance; failed items are None to readers)",
    "map.zip": "native (each mapped instance reads element i of each list; lists of different lengths fail "
    "<node>.items)",
    "map.subpipeline": (
        "unsupported: run it with --backend local, flyte-local, flyte2-local or kfp-local, or map each step of the body in turn, each over the list "
        "the previous map returned: element i of each list is item i, and il.zip maps two lists together; or "
        "make the body one @il.step (a mapped task group, @task_group with .expand, is not rendered yet)"
    ),
    "map.fields": (
        "unsupported: take the whole record in the step, an input typed as the dataclass or dict, and map "
        "over the records as they are, without fields=; or run it with --backend local or flyte2-local (expand_kwargs over "
        "the records is not rendered yet)"
    ),
    "fan_in": "native (a map's readers depend on <node>.collect; lists are read from the run state)",
    "finally": "native (a task with trigger rule all_done after the body, with the body's il.RunStatus settled "
    "from the run state)",
    "finally.block": "native (a task with trigger rule all_done after the block's tasks; what reads the block "
    "from outside it waits for it)",
    "types.model_files": "native (the run's value store keeps a file field of a dataclass or pydantic model as a "
    "folder beside the model's JSON)",
    "fallback": "native (trigger rules: the fallback's first tasks all_done after the attempt's, running only if it "
    "failed, and what reads either all_done; the failed task is no leaf, so the DAG run succeeds with the fallback)",
    "finally.block.nested": "native (the inner block's all_done task upstream of the outer one's and of what "
    "reads the inner block, as nested setup/teardown pairs)",
    "subpipeline": "native (a TaskGroup per call, its steps named <call>.<step>)",
    "subpipeline.cache": "unsupported as a unit: the inner steps cache one by one",
    "subpipeline.finally": "native (a task with trigger rule all_done after the call's tasks)",
    "join.run_if": "native (the task's trigger rule: none_failed, all_success, none_failed_min_one_success, "
    "one_success, all_done; the worker decides the same from the run state under serial)",
    "skip": "native (the worker raises AirflowSkipException for il.Skip; a map's item is a skipped task instance)",
    "finally.block.reads_output": "native (the all_done finally task reads the body's values; None where none was made)",
    "on_failure": "emulated: an all_done task whose body runs the step only if its scope failed, else skips",
    "cache": "emulated: interlock's cache (Airflow has none); a hit is a task that succeeds without calling "
    "the step, recorded as cached",
    "checkpoint": "native (the shim; a shared state_root or s3:// store on a deployment)",
    "retry.transient": "emulated: retried at once in the task by the shim",
    "retry.any_backoff": "native (Retry(N, wait=...): retries=N, retry_delay, retry_exponential_backoff, "
    "max_retry_delay; the retry_policy waits each delay the shim computed)",
    "retry.contention_backoff": "native (retries, retry_delay, retry_exponential_backoff, max_retry_delay; a "
    "TaskFlow task's retry_policy waits the step's own backoff delay; retries=shim: the shim waits in the task)",
    "retry.preempted": "native (an Airflow retry of the task, resumed from its checkpoint; outside the budget "
    "in the shim's count)",
    "retry.fatal_stop": "native (a FATAL failure ends the task with AirflowFailException, which Airflow never "
    "retries; the shim's stop marker ends a pod's retry in seconds, as a pod's exit code cannot say the kind)",
    "failure_policy.stop": "emulated: every task checks the run state first; after a failure no node starts "
    "(airflow-local: serial=True orders the tasks as the local backend runs them)",
    "failure_policy.continue": "emulated: each task starts unless it depends on a failure (core's "
    "Downstream, replayed from the run state)",
    "secrets": "emulated: read from the environment variable each Secret names",
    "labels": "emulated: recorded in the receipt",
    "queue": "emulated: recorded in the receipt",
    "distributed": "unsupported (no rank processes under an Airflow task yet): use local, kfp or flyte",
    "trigger.cron": "native (the DAG's schedule: a CronTriggerTimetable in the cron's time zone, several crons of "
    "one zone a MultipleCronTriggerTimetable; active, catch_up, max_concurrent as is_paused_upon_creation, catchup, "
    "max_active_runs, one set for the DAG; a scheduled run's params get the trigger's inputs and time_input the "
    "logical date)",
    "trigger.every": "native (a DeltaTriggerTimetable, from start as the DAG's start_date; not beside a cron)",
    "trigger.data": "native (an Asset on the URI, several any of them, with a timetable an AssetOrTimeSchedule; "
    "uri_input gets the asset event's extra['uri'], else the asset's URI)",
    "trigger.drift": "unsupported (no orchestrator measures drift: run `interlock watch FILE --backend airflow-local`)",
}

_CLUSTER = {
    "gpu": "native (KubernetesPodOperator container_resources: nvidia.com/gpu limit)",
    "accelerator": "native (node selector cloud.google.com/gke-accelerator)",
    "shared_memory": "native (a Memory emptyDir volume on /dev/shm)",
    "node_selector": "native (KubernetesPodOperator node_selector)",
    "tolerations": "native (KubernetesPodOperator tolerations)",
    "interruptible": "native: spot_selector/spot_toleration (KEY=VALUE) put the pod on spot nodes; the shim "
    "checkpoints on SIGTERM in the pod (INTERLOCK_ON_CLUSTER=1) and Airflow retries it as PREEMPTED",
    "timeout": "native (execution_timeout on the pod task; the shim's own timer inside)",
    "secrets": "native (Kubernetes secret env vars from the provider's Secret; values never in the DAG)",
    "labels": "native (pod labels and annotations)",
    "queue": "native (Kueue's kueue.x-k8s.io/queue-name and priority-class pod labels)",
}

_LOCAL = {
    "run": "native (Airflow's dag.test() on a throwaway SQLite metadata database in the run's folder)",
    "resume": "native: stop markers cleared, checkpoints and cache kept, steps that succeeded earlier in the "
    "run with the same code and inputs are not re-run (each task checks its values' inputs key)",
    "gpu": "emulated: requested in the spec; the step runs on whatever devices this host has",
    "accelerator": "emulated: recorded in the receipt, not scheduled",
    "shared_memory": "emulated: ignored (no container)",
    "node_selector": "emulated: ignored (no scheduler)",
    "tolerations": "emulated: ignored (no scheduler)",
    "interruptible": "emulated: recorded only; SIGTERM or Ctrl-C stops the run (checkpoint first if the step "
    "has a policy), with a receipt",
    "timeout": "native (the shim's timer in the task)",
    "retry.contention_backoff": "emulated: the shim waits its backoff in the task (retries=shim: dag.test() "
    "would hold the run for Airflow's retry delay as well)",
    "retry.any_backoff": "emulated: the shim waits and retries in the task (retries=shim)",
    "retry.preempted": "emulated: the shim, outside the retry budget",
    "retry.fatal_stop": "native (the shim: a FATAL failure is never retried; the task fails with "
    "AirflowFailException)",
    "trigger.cron": "emulated: `interlock watch --backend airflow-local` evaluates it and starts runs here",
    "trigger.every": "emulated: `interlock watch --backend airflow-local` evaluates it and starts runs here",
    "trigger.data": "emulated: `interlock watch --backend airflow-local` evaluates it and starts runs here",
    "trigger.drift": "emulated: `interlock watch --backend airflow-local` evaluates it and starts runs here",
}


class AirflowBackend:
    """Compile-only: a DAG file and its compiled spec for an Airflow 3 DAGs folder."""

    name = BACKEND

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name,
            features={**_FEATURES, **_CLUSTER,
                      "run": "unsupported: run locally with --backend airflow-local, or deploy the DAG file and "
                      "its .interlock.json into the DAGs folder and trigger it"},
            description="Apache Airflow 3: a DAG file (KubernetesPodOperator or TaskFlow tasks) and its spec",
            compile_options=AirflowOptions,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        return write_dag(spec, Path(out), AirflowOptions.of(options))


class AirflowLocalBackend:
    """The same DAG, TaskFlow form, run by real Airflow's dag.test() here."""

    name = LOCAL_BACKEND

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name,
            features={**_FEATURES, **_LOCAL},
            description="Apache Airflow 3 run locally by dag.test() (TaskFlow tasks, SQLite metadata database)",
            run_options=AirflowLocalOptions,
            compile_options=AirflowOptions,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        return write_dag(spec, Path(out), AirflowOptions.of(options))

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        from .local import AirflowLocalRun

        return AirflowLocalRun(spec, options).execute(params)
