"""The two Flyte 2 backends: ``flyte2`` (compile a module for a Flyte 2 cluster) and
``flyte2-local`` (run that module in the `flyte` SDK's local mode).

Entry points (pyproject, group ``interlock.backends``)::

    flyte2 = "interlock.adapters.flyte2.backend:Flyte2Backend"
    flyte2-local = "interlock.adapters.flyte2.backend:Flyte2LocalBackend"
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import BackendOptions, Capabilities, RunOptions
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult

# Capabilities are data: `interlock backends` lists them without importing the SDK. Without
# it installed the entry point fails to load, and the CLI names the extra.
if importlib.util.find_spec("flyte") is None:
    raise ImportError("No module named 'flyte'", name="flyte")

CLUSTER_FEATURES = {
    "gpu": "native (flyte.Resources(gpu=...))",
    "accelerator": "native (the SDK's device names: nvidia-h200 -> 'H200:N'; a MIG partition 'nvidia-h200:1g.18gb' "
    "-> flyte.GPU('H200', N, partition='1g.18gb'))",
    "shared_memory": "native (flyte.Resources(shm=...))",
    "node_selector": "native (the task's flyte.PodTemplate)",
    "tolerations": "native (the task's flyte.PodTemplate)",
    "interruptible": "native (task interruptible=True)",
    "timeout": "native (flyte.Timeout(max_runtime=timeout + 60s) as a backstop) + the shim's timer "
    "(FailureKind.TIMEOUT, retried per Retry(timeout=N))",
    "retry.transient": "native (a plain exception: Flyte retries it under the task's RetryStrategy)",
    "retry.contention_backoff": "native (RetryStrategy(count, backoff=flyte.Backoff(base=first, factor, cap=max_delay)))",
    "retry.any_backoff": "native (Retry(N, wait=...) is RetryStrategy(N, backoff=flyte.Backoff(...)))",
    "retry.preempted": "native (a recoverable error after the step checkpointed; counted in the RetryStrategy)",
    "retry.fatal_stop": "native (FATAL raises flyte.errors.NonRecoverableError: not retried with attempts left)",
    "cache": "native (flyte.Cache('auto', version_override=<code fingerprint>, ignored_inputs=...); the inputs "
    "Flyte hashes are interlock's content hashes of DataFrames and directories)",
    "checkpoint": "emulated: the shim's checkpoint store (use an s3:// store on a cluster)",
    "gates": "native (an if in the driver task)",
    "condition.expression": "native (evaluated in the driver task)",
    "condition.or": "native (evaluated in the driver task)",
    "branch.chain": "native (if/elif in the driver task)",
    "branch.value": "native (the value of the branch that ran)",
    "map": "native (one task call per item, awaited together with asyncio.gather, at most `concurrency` at "
    "once; not flyte.map, which maps a single parameter when others are bound and cannot name each item)",
    "map.tolerate": "native (gather(return_exceptions=True); failed items are None)",
    "map.zip": "native (element i of each list to its item's task; lists of different lengths fail the node)",
    "map.subpipeline": (
        "native (the call's nested driver task once per item, awaited together, at most `concurrency` at "
        "once; each body step's task runs as <call>.<step>[i], its outputs gathered into lists)"
    ),
    "map.fields": "native (each item's fields, read by the driver, to the inputs of their names)",
    "fan_in": "native (a list value)",
    "subpipeline": "native (a nested driver task per call, call_<call>, handed the caller's books as JSON and "
    "returning what its steps did; the inner steps are named <call>.<step>)",
    "subpipeline.cache": "unsupported as a unit: the inner steps cache one by one",
    "finally": "native (the driver's try/finally, with il.RunStatus settled from the run state)",
    "finally.block": "native (a try/finally around the block in the driver: its finally step as the block ends, "
    "with the block's status; in a sub-pipeline call's driver task too)",
    "types.model_files": "native (the value store keeps a file field of a dataclass or pydantic model as a folder "
    "beside the model's JSON, as a flyte.io.File inside a model)",
    "fallback": "native (the driver's own try/except: a failed step of an il.attempt() block ends it, the run goes "
    "on with the fallback block, handed the attempt's il.RunStatus)",
    "finally.block.nested": "native (nested try/finally in the driver, the inner block's step first; the outer "
    "block's status covers the inner block and its finally step)",
    "subpipeline.finally": "emulated: as finally.block, for each call the run reached",
    "join.run_if": "native (the driver decides from how each upstream ended, as plain Python)",
    "skip": "native (the task ends without outputs, never cached or retried; the driver reads the skip from its "
    "fragment; a map's item is None)",
    "finally.block.reads_output": "native (the driver hands the finally task the body's values; None where none was made)",
    "on_failure": "native (the driver's finally runs it only when its scope failed)",
    "failure_policy.stop": "native (the driver starts nothing after a failure; steps awaited together with the "
    "failed one finish)",
    "failure_policy.continue": "native (the driver starts every step that does not depend on a failure)",
    "secrets": "native (flyte.Secret requests on the step's TaskEnvironment, as environment variables)",
    "labels": "native (the task's flyte.PodTemplate labels/annotations)",
    "queue": "native: Kueue labels kueue.x-k8s.io/queue-name and priority-class on the task's flyte.PodTemplate",
    "distributed": "native (flyteplugins-pytorch: the step's TaskEnvironment has plugin_config=Elastic(nnodes, "
    "nproc_per_node, max_restarts), a PyTorchJob on the cluster with torch elastic in each pod; an elastic range as "
    "nnodes='min:max', a fixed world as min = max; Torchrun(timeout=) as nccl_collective_timeout_sec)",
    "trigger.cron": "native (a flyte.Trigger '<pipeline>-<trigger>' with flyte.Cron(expr, timezone=tz) on the driver "
    "task; its inputs, time_input as flyte.TriggerTime (that parameter a datetime input of the driver, handed to the "
    "pipeline as ISO 8601 text), active as auto_activate; no catch-up, and no cap on runs at "
    "once: max_concurrent is not rendered)",
    "trigger.every": "native (a flyte.Trigger with flyte.FixedRate(minutes, start_time=start) on the driver task)",
    "trigger.data": "unsupported (a flyte.OnArtifact trigger fires on a Flyte artifact, not on an object under a "
    "URI: run `interlock watch FILE --backend flyte2-local`, or use an Airflow Asset with --backend airflow)",
    "trigger.drift": "unsupported (no orchestrator measures drift: run `interlock watch FILE --backend flyte2-local`)",
}

LOSSY = (
    "values: each port's value moves as a JSON reference (inline JSON, or a content hash into the value store), "
    "not as a Flyte type; on a cluster the store is a path every task mounts (compile option store)",
    "retry budgets: one RetryStrategy per task; count = transient + preempted + timeout + contention attempts, "
    "and the contention Backoff paces every retry of the step",
    "independent steps of one scope are awaited together (asyncio.gather): when one fails under the stop "
    "policy, its siblings already started finish (local would not have started the later ones); compile "
    "option concurrent=false gives plan order. flyte2-local runs in plan order, as local does",
    "distributed: the plugin turns a failed worker into a failed job, which Flyte retries whatever the kind; a FATAL "
    "failure's marker (on the value store) makes that retry end at once. Only rank 0's result is returned; the other "
    "ranks' fragments go to ranks/<n>/. A fixed world is an elastic one with min = max (the plugin has no "
    "flytekit PyTorch job)",
)


@dataclass(frozen=True)
class Flyte2CompileOptions(BackendOptions):
    """Compile options of ``flyte2`` (``interlock compile --backend flyte2 --image I --store S``)."""

    image: str | None = None  # the tasks' image (interlock and the pipeline's code installed)
    store: str = "/mnt/interlock"  # the value store: a path every task mounts (a shared volume)
    # Independent steps awaited together (asyncio.gather); False: one after another in plan order.
    concurrent: bool = True


class Flyte2Backend:
    """Compile-only: the Python module a Flyte 2 user deploys (``flyte deploy`` / ``flyte run``)."""

    name = "flyte2"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name,
            features={
                **CLUSTER_FEATURES,
                "run": "unsupported: interlock compile --backend flyte2, then `flyte deploy` or `flyte run` the "
                "module; or run here with --backend flyte2-local",
            },
            lossy=LOSSY,
            description="a `flyte` SDK 2.x module: TaskEnvironments, one task per step, the driver task",
            compile_options=Flyte2CompileOptions,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        from .compile import compile_to

        o = Flyte2CompileOptions.of(options)
        return compile_to(spec, Path(out), image=o.image, store=o.store, concurrent=o.concurrent)


class Flyte2LocalBackend(Flyte2Backend):
    """Runs the compiled module's driver in the SDK's local mode; the shim retries in-process."""

    name = "flyte2-local"

    def capabilities(self) -> Capabilities:
        local = {
            "gpu": "emulated: compiled into the task's Resources; the step runs on this host's devices",
            "accelerator": "emulated: compiled, not scheduled",
            "shared_memory": "emulated: compiled, not applied (no pod)",
            "node_selector": "emulated: compiled, not applied (no scheduler)",
            "tolerations": "emulated: compiled, not applied (no scheduler)",
            "interruptible": "emulated: recorded only; SIGTERM or Ctrl-C stops the run",
            "timeout": "emulated: the shim enforces it",
            "retry.transient": "emulated: the shim retries in-process (the same budgets as local)",
            "retry.contention_backoff": "emulated: the shim backs off in-process (the run's sleeper)",
            "retry.any_backoff": "emulated: the shim waits and retries in-process",
            "retry.preempted": "emulated: the shim retries in-process",
            "retry.fatal_stop": "native (shim; NonRecoverableError to the SDK)",
            "cache": "native (the SDK's local cache, in the interlock work directory, never ~/.flyte)",
            "checkpoint": "emulated: the shim restores from the run's checkpoint store",
            "secrets": "emulated: read from the environment variable each Secret names",
            "labels": "emulated: compiled and recorded in the receipt",
            "queue": "emulated: compiled and recorded in the receipt (no Kueue locally)",
            "trigger.cron": "emulated: `interlock watch --backend flyte2-local` evaluates it and starts runs here",
            "trigger.every": "emulated: `interlock watch --backend flyte2-local` evaluates it and starts runs here",
            "trigger.data": "emulated: `interlock watch --backend flyte2-local` evaluates it and starts runs here",
            "trigger.drift": "emulated: `interlock watch --backend flyte2-local` evaluates it and starts runs here",
            "map": "native (one task call per item, awaited together; the items' shims run on up to 8 threads, "
            "or one at a time on the run's thread for a step with a timeout, as on local)",
            "run": "native (flyte.with_runcontext(mode='local').run of the compiled driver task, its coroutine on an "
            "event loop of the run's own thread; each step's shim inline there, so signals and timeouts behave as on "
            "local)",
            "failure_policy.stop": "native (the driver starts nothing after a failure; steps run in plan order)",
            "resume": "emulated: stop markers cleared and checkpoints restored (same run id); steps not "
            "served from the SDK's local cache run again",
            "distributed": "unsupported: run it with --backend local or flyte-local, which launch the ranks, or "
            "compile it with --backend flyte2 for a cluster (in local mode the SDK's PyTorch plugin runs a "
            "distributed task once, in one process: no ranks, no process group)",
        }
        return Capabilities(
            backend=self.name, features={**CLUSTER_FEATURES, **local}, lossy=LOSSY,
            description="the flyte2 module run in the `flyte` SDK's local mode; the shim adds retries, "
            "timeouts, checkpoint restore and receipts",
            compile_options=Flyte2CompileOptions,
        )

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        from .local import Flyte2LocalRunner

        return Flyte2LocalRunner(spec, options).run(params)
