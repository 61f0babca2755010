"""The two KFP backends: ``kfp`` (compile to IR YAML for a cluster or Vertex AI Pipelines)
and ``kfp-local`` (compile, then run through kfp.local's SubprocessRunner)."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import BackendOptions, Capabilities, RunOptions
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult

from .compile import compile_pipeline
from .component import DEFAULT_IMAGE
from .distributed import require_state_volume
from .image import DEFAULT_BASE, write_image_files
from .names import RUN_ID_ENV, kfp_pipeline_name
from .policies import LOSSY, KfpLocalOptions, KfpOptions, neutral_notes

# Capabilities are data and kfp loads only when a pipeline compiles, so without kfp this
# module would import fine and the backend would fail later with a raw ModuleNotFoundError.
# Failing here lets discovery name the extra to install, as for flyte.
if importlib.util.find_spec("kfp") is None:
    raise ImportError("No module named 'kfp'", name="kfp")

log = logging.getLogger("interlock.kfp")

_FEATURES = {
    "join.run_if": "unsupported: a KFP task runs when its upstream tasks succeeded (an exit task alone runs after "
    "any); join the branches with il.branch_value (dsl.OneOf), or run on airflow, flyte2 or local",
    "skip": "unsupported: a KFP task cannot end skipped; return an Optional value and test it with il.when, or run "
    "on airflow, flyte2 or local",
    "finally.block.reads_output": "unsupported: an exit task reads pipeline parameters only; pass the finally step "
    "parameters, or run on airflow, flyte2 or local",
    "on_failure": "emulated: an exit task (dsl.ExitHandler) like il.finally_'s, which KFP starts whatever the "
    "outcome; its shim runs the step only if the scope failed (KFP cannot put a condition on an exit task)",
    "failure_policy.stop": "emulated: KFP starts every task that does not depend on a failure; each task's shim "
    "refuses to start once a step of the run has failed for good (a FATAL or spent-budget marker in the run "
    "state: share it with state_pvc), and so does the exit task of an il.finally_ block the run never entered",
    "failure_policy.continue": "native (KFP's own behaviour: what does not depend on a failure runs)",
    "gpu": "native (accelerator limit)",
    "accelerator": "native: accelerator type is the resource name, the model a node selector",
    "shared_memory": "native (kfp-kubernetes: Memory emptyDir on /dev/shm)",
    "node_selector": "native (kfp-kubernetes)",
    "tolerations": "native (kfp-kubernetes)",
    "interruptible": "emulated: spot node selector + toleration + set_retry (KFP has no preemption handler)",
    "timeout": (
        "native (kfp-kubernetes activeDeadlineSeconds) + the shim's own timer (FailureKind.TIMEOUT, retried per "
        "Retry(timeout=N)); in the pod SIGTERM to an interruptible step is a spot reclaim, to any other a stop"
    ),
    "retry.transient": "emulated: retried in-process by the shim",
    "retry.contention_backoff": "native (set_retry backoff)",
    "retry.any_backoff": "native (Retry(N, wait=...) is set_retry(N, backoff_duration, backoff_factor, "
    "backoff_max_duration))",
    "retry.preempted": "emulated: KFP retries (counted into set_retry), resumed from the checkpoint",
    "retry.fatal_stop": "emulated: a stop marker whenever the shim gives up (FATAL, a spent budget), kept in "
    "durable run state (state_pvc, pipeline_root or state_store); a KFP retry of that step exits in seconds",
    "cache": "native (KFP caching; the code fingerprint is in the component command)",
    "checkpoint": "native (the shim; needs a shared store on a cluster: state_pvc or s3://)",
    "gates": "native (dsl.If)",
    "condition.expression": "native (dsl.If on each comparison; & as nested dsl.If; ~ pushed into the comparisons)",
    "condition.or": "unsupported (KFP conditions are conjunctions): refused at build time",
    "branch.chain": "native (dsl.If/dsl.Elif/dsl.Else; each block's own condition must be one comparison)",
    "branch.value": "native (dsl.OneOf)",
    "map": "native (dsl.ParallelFor with parallelism; an enumerate-items task gives each iteration its index)",
    "map.tolerate": "emulated: ParallelFor has no minimum-success policy; each item's task succeeds with an "
    "envelope (ok/failed) after in-process retries, and a <node>-tolerance task after the loop fails when more "
    "items failed than allowed, else hands readers the list with None at failed items (not for artifact outputs)",
    "map.zip": "native (the enumerate-items task zips the lists into one list of records, as a KFP user zips "
    "them in a task, and each iteration reads its elements from its record; lists of different lengths fail "
    "that task)",
    "map.subpipeline": (
        "native (dsl.ParallelFor around the call's nested pipeline component, over the enumerate-items task's "
        "list; parallelism: concurrency; readers get dsl.Collected of the call's outputs; each body task takes the "
        "item and runs as <call>.<step>[i]; with fields= each body task reads its field of the record; a map inside "
        "the body is a ParallelFor inside the call's component, its items under <call>.<step>[i][j] (an inner "
        "call's items carry the outer item); tolerate=, fields= of a call inside a mapped call and an il.finally_ "
        "inside it are refused at build)"
    ),
    "map.fields": (
        "native (the ParallelFor's item is the record, as with a KFP user's item.a; each task takes the record "
        "and its shim reads each field into the input of its name, so a missing field fails that item naming it)"
    ),
    "fan_in": "native for a map's output (dsl.Collected); a list written in the body goes through a "
    "<node>-<port>-gather task (one input per item; a literal list of artifacts is refused)",
    "finally": "native (dsl.ExitHandler around the body, the finally step as its exit task with "
    "dsl.PipelineTaskFinalStatus; with state_pvc it also writes the receipt; pipeline outputs are then not "
    "declared in the IR, as KFP refuses outputs from inside an ExitHandler)",
    "subpipeline": "native (a pipeline-as-component per call: a nested DAG comp-<call> whose inputs and outputs "
    "are the sub-pipeline's parameters and outputs; branches, ParallelFor and calls nest inside it)",
    "subpipeline.cache": "unsupported as a unit (KFP caches container executions, not DAG tasks): the inner "
    "steps cache one by one",
    "finally.block": "native (a dsl.ExitHandler around the block's tasks, the finally step its exit task with "
    "dsl.PipelineTaskFinalStatus of the group; KFP allows exit handlers at the outermost scope only, so inside "
    "a whole-pipeline finally or state_pvc's receipt handler the block's finally task runs after its tasks with "
    ".ignore_upstream_failure(), its status from the run state)",
    "types.model_files": "unsupported: pass the file as its own input and output, an il.Dataset or il.Model, or run "
    "on local, flyte2 or airflow (a dataclass crosses a KFP task as a STRUCT parameter, without its files)",
    "fallback": "unsupported: run it on flyte2, airflow or local, or catch the error in one step's function "
    "with try/except (a failed task fails a KFP run: only an exit task runs after it, and an emulation would hide the failure from KFP's own status)",
    "finally.block.nested": "native (KFP allows no exit handler inside another: the inner block's tasks in the "
    "outer block's ExitHandler, its finally task after them with .ignore_upstream_failure(), and what reads the "
    "inner block .after() it; the status is settled from the run state, without PipelineTaskFinalStatus)",
    "subpipeline.finally": "native (a dsl.ExitHandler around the body of the call's nested pipeline comp-<call>, "
    "the finally step its exit task; a call whose outputs are read: the body as its own nested pipeline "
    "comp-<call>-body and the finally task after it with .ignore_upstream_failure() and "
    "dsl.PipelineTaskFinalStatus, as KFP refuses a pipeline's outputs from inside an ExitHandler)",
    "secrets": "native (kfp-kubernetes secret references; values never in the YAML)",
    "labels": "native (kfp-kubernetes pod labels and annotations)",
    "queue": "native: Kueue labels kueue.x-k8s.io/queue-name and priority-class as kfp-kubernetes pod labels; "
    "a distributed step: on the TrainJob/PyTorchJob itself (admitted as one gang), not on the launcher pod",
    "distributed": "native: the task launches a Kubeflow Trainer v2 TrainJob (default; "
    "distributed_job=pytorchjob: a Training Operator v1 PyTorchJob), ranks run the shim under torchrun; "
    "needs state_pvc; fixed worlds only (no elastic min_nodes)",
    "trigger.cron": "native (a KFP recurring run per trigger, written beside the IR as <pipeline>.recurring.json "
    "and created by `interlock triggers apply FILE --backend kfp --option host=...`: KFP's six-field cron, "
    "max_concurrency, no_catchup, enabled, the inputs as parameters, time_input as [[ScheduledTime...]] in UTC; "
    "crons in UTC only, KFP has no time zone)",
    "trigger.every": "native (a recurring run with interval_second, start_time from start)",
    "trigger.data": "unsupported (KFP has no data trigger: run `interlock watch FILE --backend kfp-local`, or use "
    "an Airflow Asset with --backend airflow)",
    "trigger.drift": "unsupported (no orchestrator measures drift: run `interlock watch FILE --backend kfp-local`)",
}


def _compile(spec: PipelineSpec, out: Path, opts: KfpOptions) -> list[Path]:
    require_state_volume(spec, opts)
    for note in neutral_notes(spec, opts):
        log.warning(note)
    if kfp_pipeline_name(spec.name) != spec.name:
        log.warning("pipeline %s is named %s on KFP: KFP pipeline names are lowercase letters, digits and '-'",
                    spec.name, kfp_pipeline_name(spec.name))
    if not opts.image and any(not s.image for s in spec.steps):
        log.warning(
            "no image given: steps use %s; build one (emit_image=True) and compile with image=REGISTRY/IMAGE:TAG",
            DEFAULT_IMAGE,
        )
    path = compile_pipeline(spec, out, opts)
    written = [path]
    if opts.emit_image:
        files = write_image_files(
            spec, path.parent / f"{spec.name}-image", base=opts.base_image or DEFAULT_BASE, extra=opts.requirements,
            context=Path(opts.context) if opts.context else None,
        )
        written += [files.dockerfile, files.requirements, files.ignore, *([files.wheel] if files.wheel else [])]
    return written


class KfpBackend:
    """Compile-only: IR YAML that a KFP cluster or Vertex AI Pipelines accepts (it has no ``run``)."""

    name = "kfp"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name,
            features={
                **_FEATURES,
                "run": "unsupported: run locally with --backend kfp-local, or submit the YAML with "
                "kfp.Client(host=...).create_run_from_pipeline_package('pipeline.yaml', arguments={...})",
            },
            lossy=LOSSY,
            description="Kubeflow Pipelines v2: compiles to IR YAML (pipeline spec + kfp-kubernetes platform spec)",
            compile_options=KfpOptions,
            run_id_env=RUN_ID_ENV,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        """``options``: KfpOptions (image, caching, cloud presets, state_pvc, ..., emit_image for the Dockerfile).
        The time triggers' recurring-run definitions go beside the IR (``recurring.py``)."""
        from .recurring import definitions, write

        definitions(spec)  # refused before anything is written
        written = _compile(spec, Path(out), KfpOptions.of(options))
        recurring = write(spec, written[0])
        return [*written, *([recurring] if recurring else [])]

    def apply_triggers(self, spec: PipelineSpec, compiled: Path, options: BackendOptions) -> list[str]:
        """Create the recurring runs compiled into ``compiled`` on the KFP API at option ``host``,
        in option ``experiment``; one of the same name is replaced."""
        from .recurring import apply

        opts = KfpOptions.of(options)
        return apply(spec, Path(compiled), host=opts.host, experiment=opts.experiment, namespace=opts.namespace)


class KfpLocalBackend:
    """The same IR, run by kfp.local's SubprocessRunner in this environment."""

    name = "kfp-local"

    def capabilities(self) -> Capabilities:
        features = {
            **_FEATURES,
            "run": "native (kfp.local SubprocessRunner, use_venv=False)",
            "resume": "emulated: stop markers cleared and checkpoints restored (same run id); steps not "
            "served from kfp's cache run again",
            "gpu": "emulated: recorded; kfp.local ignores resources",
            "accelerator": "emulated: recorded; kfp.local ignores resources",
            "shared_memory": "emulated: ignored locally",
            "node_selector": "emulated: compiled, ignored locally",
            "tolerations": "emulated: compiled, ignored locally",
            "interruptible": (
                "emulated: recorded only; SIGTERM (passed on to the running task) or Ctrl-C stops the run "
                "(checkpoint first if the step has a policy), exit 143/130 with a receipt; no preemption locally"
            ),
            "timeout": "native (the shim's timer; kfp.local ignores pod deadlines)",
            "secrets": "emulated: read from the environment variable each Secret names",
            "labels": "emulated: compiled and recorded, no pods locally",
            "queue": "emulated: compiled and recorded, no Kueue locally",
            "checkpoint": "native (the shim, run directory or s3://)",
            "distributed": "emulated: the ranks run as local processes on one node (gloo on CPU)",
            "trigger.cron": "emulated: `interlock watch --backend kfp-local` evaluates it and starts runs here",
            "trigger.every": "emulated: `interlock watch --backend kfp-local` evaluates it and starts runs here",
            "trigger.data": "emulated: `interlock watch --backend kfp-local` evaluates it and starts runs here",
            "trigger.drift": "emulated: `interlock watch --backend kfp-local` evaluates it and starts runs here",
            "failure_policy.stop": "emulated: tasks start in plan order (kfp.local's own order changes from run to "
            "run); after a failure no new step starts, and an il.finally_ block's exit task runs only if the run "
            "reached the block",
            "failure_policy.continue": "native (kfp.local's control-flow orchestrator for every DAG, in plan order: "
            "what depends on a failure is skipped)",
        }
        return Capabilities(
            backend=self.name,
            features=features,
            lossy=LOSSY,
            description="Kubeflow Pipelines v2 run locally by kfp.local (caching and retries by kfp)",
            run_options=KfpLocalOptions,
            compile_options=KfpOptions,
            run_id_env=RUN_ID_ENV,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        return _compile(spec, Path(out), KfpOptions.of(options))

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        from .local import KfpLocalRun

        kfp_options = KfpOptions.from_options(local_conditions=True)
        return KfpLocalRun(spec, options, kfp_options).execute(params)
