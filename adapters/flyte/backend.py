"""The two Flyte backends: ``flyte`` (compile for a cluster) and ``flyte-local`` (run via flytekit).

Entry points (pyproject, group ``interlock.backends``)::

    flyte = "interlock.adapters.flyte.backend:FlyteBackend"
    flyte-local = "interlock.adapters.flyte.backend:FlyteLocalBackend"
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import BackendOptions, Capabilities, RunOptions
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult

# Capabilities are data: this module imports core only, so `interlock backends` lists them
# without loading flytekit (~1 s). Without flytekit installed the entry point still fails to
# load, as before, and the CLI names the extra to install.
if importlib.util.find_spec("flytekit") is None:
    raise ImportError("No module named 'flytekit'", name="flytekit")

# What a cluster does with each feature; "emulated" says how, in words.
CLUSTER_FEATURES = {
    "join.run_if": "unsupported: a Flyte node runs when all its upstream nodes succeeded (no trigger rules); "
    "join the branches with il.branch_value, or run on airflow, flyte2 or local",
    "skip": "unsupported: a Flyte task cannot end skipped; return an Optional value and test it with il.when, or "
    "run on airflow, flyte2 or local",
    "finally.block.reads_output": "unsupported: a failure node reads workflow inputs only; pass the finally step "
    "parameters, or run on airflow, flyte2 or local",
    "on_failure": "native (the workflow's or the block's sub-workflow's failure node, on_failure, alone: no "
    "success-path node; flyte-local: flytekit's local execution calls it when the body raises)",
    "failure_policy.stop": "native (WorkflowMetadata on_failure=FAIL_IMMEDIATELY, on every workflow and sub-workflow; "
    "Flyte aborts the nodes still running instead of letting them finish)",
    "failure_policy.continue": "native (WorkflowMetadata on_failure=FAIL_AFTER_EXECUTABLE_NODES_COMPLETE, on every "
    "workflow and sub-workflow)",
    "gpu": "native (requests/limits gpu, strings)",
    "accelerator": "native (flytekit.extras.accelerators; A100/A100-80GB MIG partitions as 'device:profile')",
    "shared_memory": "native (task shared_memory -> /dev/shm volume)",
    "node_selector": "native (pod template)",
    "tolerations": "native (pod template)",
    "interruptible": (
        "native (task metadata interruptible); in the pod SIGTERM to an interruptible step is a spot reclaim "
        "(checkpoint, PREEMPTED, Flyte retry); to any other step it is a stop (checkpoint, STOPPED, not retried)"
    ),
    "timeout": "native (task metadata timeout) + the shim's timer (FailureKind.TIMEOUT, retried per Retry(timeout=N))",
    "retry.transient": "native (FlyteRecoverableException + task retries)",
    "retry.contention_backoff": "emulated: the shim backs off in the pod (Flyte retries have no per-task backoff)",
    "retry.any_backoff": "emulated: Flyte 1 retries have no backoff: the shim waits and retries in the pod "
    "(the task's retries=0)",
    "retry.preempted": "native (recoverable error after the step checkpointed; counted in task retries)",
    "retry.fatal_stop": "native (FATAL is a non-recoverable user error: Flyte does not retry it)",
    "cache": "native (Cache(version=code fingerprint), content hashes for DataFrames and directories)",
    "checkpoint": "emulated: the shim's checkpoint store (use an s3:// store on a cluster; pods do not share disks)",
    "gates": "native (conditional with a no-op else branch; a block is a sub-workflow)",
    "condition.expression": "native (conditional(...).if_(comparisons joined by & |); ~ pushed into the comparisons)",
    "condition.or": "native (| in the conditional's expression)",
    "branch.chain": "native (one conditional: if_().then().elif_().then().else_().then(); each block a sub-workflow)",
    "branch.value": "native (the conditional's output: every branch's sub-workflow returns the value)",
    "map": "native (array node: flytekit ArrayNodeMapTask over the per-item task, with concurrency)",
    "map.tolerate": "native for a fraction (min_success_ratio; failed items are None); a count is refused",
    "map.zip": "native (the array node maps every list input it does not bind, element i of each; lists of "
    "different lengths fail the node)",
    "map.subpipeline": (
        "native (a dynamic task <pipeline>.<call> calls the body's sub-workflow once per item, with the item's "
        "parameters and index, and gathers each output into a list; concurrency is not enforced on a dynamic's "
        "nodes: propeller runs them as it schedules; a step map in the body is an array node binding the item's "
        "index; tolerate=, a mapped call inside the body and an il.finally_ inside it are refused at build)"
    ),
    "map.fields": (
        "unsupported: take the whole record in the step, an input typed as the dataclass or dict, and map "
        "over the records as they are, without fields=; or run it with --backend local or flyte2-local (an array node maps "
        "list inputs, not the fields of one record)"
    ),
    "fan_in": "native (a list of promises bound as a collection; a map's output is a list)",
    "subpipeline": "native (a sub-workflow per call, <pipeline>.<call>, called as a workflow node; its inputs "
    "and outputs are the sub-pipeline's parameters and outputs; branches, maps and calls nest inside it)",
    "subpipeline.cache": "unsupported as a unit (Flyte caches tasks, not workflow nodes): the inner steps cache "
    "one by one",
    "finally": "native (the workflow's failure node, on_failure, for a failed body, and the same task as the "
    "last node, downstream of every other, for a succeeded one; il.RunStatus from the run state, so share "
    "INTERLOCK_STATE_DIR on a cluster: without it the step still sees 'failed' and Flyte's error message)",
    "finally.block": "native (the block is a sub-workflow whose failure node, on_failure, is the finally step's "
    "task, and whose last node is the same task; a failed block still fails the workflow, as a KFP ExitHandler)",
    "types.model_files": "unsupported: pass the file as its own input and output, an il.Dataset or il.Model, or run "
    "on local, flyte2 or airflow (a dataclass crosses a Flyte node as a JSON literal, without its files)",
    "fallback": "unsupported: run it on flyte2, airflow or local, or catch the error in one step's function "
    "with try/except (a failed task fails a Flyte workflow: no node runs after it but the failure node, and an emulation would hide the failure from Flyte's own status)",
    "finally.block.nested": "native (the inner block's sub-workflow, with its own failure node and last node, is a "
    "node of the outer block's: the outer block goes on once the inner one and its finally step are done)",
    "subpipeline.finally": "native (the call's sub-workflow has the finally step's task as its failure node, "
    "on_failure, and as its last node; a failed body still fails the caller; outputs are the sub-workflow's)",
    "secrets": "native (secret requests, injected as environment variables)",
    "labels": "native (pod template labels/annotations; pipeline labels on the launch plan)",
    "queue": "native: Kueue labels kueue.x-k8s.io/queue-name and priority-class on the task's pod template "
    "(a distributed task: on every rank's pod)",
    "distributed": "native (flytekitplugins-kfpytorch: Elastic, or PyTorch for a fixed world)",
    "trigger.cron": "native (a '<pipeline>-<trigger>' launch plan with a CronSchedule, its inputs fixed, "
    "max_concurrent as its concurrency policy, time_input as kickoff_time_input_arg of a '<pipeline>-<trigger>' "
    "workflow whose <pipeline>.kickoff task hands the pipeline the time as ISO 8601 text; in UTC only; activated "
    "by `pyflyte register` when active, or `flytectl update launchplan --activate`)",
    "trigger.every": "native (a '<pipeline>-<trigger>' launch plan with a FixedRate, counted from its activation)",
    "trigger.data": "unsupported (Flyte 1 has no data trigger: run `interlock watch FILE --backend flyte-local`, "
    "or use an Airflow Asset with --backend airflow)",
    "trigger.drift": "unsupported (no orchestrator measures drift: run `interlock watch FILE --backend flyte-local`)",
}

LOSSY = (
    "retry budgets: Flyte keeps one retry counter per task, not one per failure kind; "
    "task retries = transient + preempted (+ contention attempts when not backed off in-process), "
    "and the shim re-applies the per-kind budget from the receipt fragments when INTERLOCK_STATE_DIR is shared",
    "retry.contention_backoff: Flyte retries at once with no per-task backoff; the shim sleeps "
    "first * factor^(n-1) in the pod instead (holding the pod while it waits)",
    "retry.preempted: a spot reclaim that kills the pod before the shim sees SIGTERM is a Flyte system "
    "retry (interruptible-failure-threshold), outside the step's preempted budget",
    "Retry.oom_remediation: done in-process by the shim (Flyte cannot change a batch size between retries)",
    "cache.ignore_inputs -> cache_ignore_input_vars (native); Cache.version folds into the code fingerprint",
    "resources: memory and GPU limits default to the request (Kubernetes requires GPU limit == request)",
    "distributed: only the rank-0 result is returned; other ranks' receipt fragments go to ranks/<n>/",
    "il.when: the closed branch runs a tiny no-op task (100m CPU, 64Mi) unless the propeller echo "
    "plugin is enabled and compile(..., echo_else=True) is used",
)


@dataclass(frozen=True)
class FlyteCompileOptions(BackendOptions):
    """Compile options of ``flyte`` (``interlock compile --backend flyte --project P ...``)."""

    # As `pyflyte package`: project, domain and version stay empty unless given, so that
    # `flytectl register files -p P -d D --version V` fills them at registration.
    project: str | None = None
    domain: str | None = None
    version: str | None = None
    image: str | None = None  # the task image (interlock and the pipeline's code installed); required
    archive: bool = True  # also write flyte-package.tgz
    echo_else: bool = False  # closed-gate branches as pod-less echo tasks (propeller's echo plugin)
    checkpoint_store: str | None = None  # where steps without CheckpointPolicy(store=) keep checkpoints


@dataclass(frozen=True)
class FlyteLocalOptions(BackendOptions):
    """Run options of ``flyte-local`` (``il.run(..., options=FlyteLocalOptions(...))``)."""

    # How torch elastic starts a distributed step's workers: spawn (fresh interpreters, what
    # CUDA needs and a cluster does) or, with False, fork (inherits the imported world: faster).
    spawn: bool = True


class FlyteBackend:
    """Compile-only: registrable protobufs for a Flyte cluster (it has no ``run``)."""

    name = "flyte"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name,
            features={
                **CLUSTER_FEATURES,
                "run": "unsupported: interlock compile --backend flyte, register the files with flytectl and "
                "run on the cluster; or run here with --backend flyte-local",
            },
            lossy=LOSSY,
            description="flytekit tasks, workflow and launch plans as protobufs (pyflyte package layout)",
            compile_options=FlyteCompileOptions,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        from .compile import compile_to

        return compile_to(spec, out, **vars(FlyteCompileOptions.of(options)))


class FlyteLocalBackend(FlyteBackend):
    """Runs through flytekit's local execution, with the shim adding what flytekit local lacks."""

    name = "flyte-local"

    def capabilities(self) -> Capabilities:
        local = {
            "failure_policy.stop": "native (flytekit local runs the workflow in plan order and stops at the first "
            "failure)",
            "failure_policy.continue": "emulated: flytekit local ignores the workflow's failure policy; the workflow "
            "body goes on with the nodes that do not depend on a failure, then fails the scope (its failure node runs)",
            "gpu": "emulated: compiled into the task; the step runs on this host's devices",
            "accelerator": "emulated: compiled into the task, not scheduled",
            "shared_memory": "emulated: compiled, not applied (no pod)",
            "node_selector": "emulated: compiled, not applied (no scheduler)",
            "tolerations": "emulated: compiled, not applied (no scheduler)",
            "interruptible": (
                "emulated: recorded only; SIGTERM or Ctrl-C stops the run (checkpoint first if the step has a "
                "policy), exit 143/130 with a receipt; no preemption outside a cluster"
            ),
            "timeout": "emulated: the shim enforces it (flytekit local does not)",
            "retry.transient": "emulated: the shim retries in-process (flytekit local does not retry)",
            "retry.contention_backoff": "emulated: the shim backs off in-process",
            "retry.any_backoff": "emulated: the shim waits and retries in-process",
            "retry.preempted": "emulated: the shim retries in-process",
            "retry.fatal_stop": "native (shim)",
            "cache": "native (flytekit local cache, in the interlock work directory); a tolerant map is never "
            "served whole (its items are not cached one by one locally)",
            "checkpoint": "emulated: the shim restores from the run's checkpoint store (flytekit local never does)",
            "secrets": "emulated: read from the environment variable each Secret names",
            "labels": "emulated: compiled and recorded in the receipt",
            "queue": "emulated: compiled and recorded in the receipt (no Kueue locally)",
            "distributed": "native (torch elastic launches nproc_per_node local processes)",
            "trigger.cron": "emulated: `interlock watch --backend flyte-local` evaluates it and starts runs here",
            "trigger.every": "emulated: `interlock watch --backend flyte-local` evaluates it and starts runs here",
            "trigger.data": "emulated: `interlock watch --backend flyte-local` evaluates it and starts runs here",
            "trigger.drift": "emulated: `interlock watch --backend flyte-local` evaluates it and starts runs here",
            "run": "native (flytekit local workflow execution)",
            "resume": "emulated: stop markers cleared and checkpoints restored (same run id); steps not "
            "served from flytekit's local cache run again",
        }
        return Capabilities(
            backend=self.name, features={**CLUSTER_FEATURES, **local}, lossy=LOSSY,
            description="flytekit local execution of the compiled workflow; the shim adds retries, "
            "timeouts, checkpoint restore and receipts",
            run_options=FlyteLocalOptions,
            compile_options=FlyteCompileOptions,
        )

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        from .local import FlyteLocalRunner

        return FlyteLocalRunner(spec, options, spawn=FlyteLocalOptions.of(options).spawn).run(params)
