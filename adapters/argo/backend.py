"""The ``argo`` backend: compile a pipeline to an Argo Workflows manifest (no local runner:
submit the YAML with ``argo submit`` or hera's ``WorkflowsService``)."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from interlock.core.backend.protocol import BackendOptions, Capabilities
from interlock.core.model.pipeline_spec import PipelineSpec

from .manifest import write
from .options import DEFAULT_IMAGE, ArgoOptions

# Capabilities are data and hera loads only when a pipeline compiles: without hera, fail here
# so that discovery names the extra to install.
if importlib.util.find_spec("hera") is None:
    raise ImportError("No module named 'hera'", name="hera")

log = logging.getLogger("interlock.argo")

FEATURES = {
    "run": "unsupported: compile only (no local Argo runner); `argo submit build/<pipeline>.yaml -p key=value`",
    "gpu": "native (nvidia.com/gpu requests and limits)",
    "accelerator": "native with accelerator_label=NODE_LABEL (a node selector on the model); else a GPU count only",
    "shared_memory": "native (a Memory emptyDir on /dev/shm)",
    "node_selector": "native (template nodeSelector)",
    "tolerations": "native (template tolerations)",
    "interruptible": "native: spot_selector/spot_toleration on the template, retried as PREEMPTED by retryStrategy "
    "(a pod lost with its node is an Argo Error, retried too)",
    "timeout": "native (activeDeadlineSeconds, 30 s after the shim's own timer, which classifies TIMEOUT)",
    "retry.transient": "emulated: retried at once by the shim inside the pod (no new pod)",
    "retry.any_backoff": "native (Retry(N, wait=...) is retryStrategy limit N with its backoff: duration, factor, "
    "cap, maxDuration)",
    "retry.contention_backoff": "native (retryStrategy backoff: duration, factor, cap, maxDuration; the expression "
    "retries the CONTENTION exit code)",
    "retry.preempted": "native (retryStrategy limit counts it; the expression retries the PREEMPTED exit code and "
    "Argo Errors; it waits the step's contention backoff when it has one: Argo has one backoff per template)",
    "retry.fatal_stop": "native (retryStrategy.expression retries only the exit codes of retryable kinds: a FATAL "
    "step, or one whose budget the shim spent, exits 80 and gets no retry pod)",
    "cache": "native (memoize in a ConfigMap, keyed by the code fingerprint and a hash of the input texts and "
    "artifact content hashes; a ConfigMap holds at most 1 MiB)",
    "checkpoint": "native (the shim; share it with state_pvc or an s3:// checkpoint store)",
    "gates": "native (when)",
    "condition.expression": "native (when: comparisons, &&, ||, !)",
    "condition.or": "native (when with ||)",
    "branch.chain": "native (each block's when is its condition and the negation of the ones before)",
    "branch.value": "native (an expression argument: the output of the branch whose task succeeded)",
    "map": "native (withParam over the list, enumerated by an expression so each item is node[i]; "
    "concurrency: the map in a DAG of its own with parallelism)",
    "map.tolerate": "emulated: each item's task succeeds with an envelope (ok/failed) after in-pod retries of every "
    "kind, and a <node>-tolerance task after the map fails when more items failed than allowed, else hands readers "
    "the list with None at failed items (Argo's continueOn would leave failed items out of the aggregated list; "
    "not for artifact outputs; tolerant items are not memoized)",
    "map.zip": "native (the withParam expression zips the lists by index)",
    "map.subpipeline": (
        "unsupported: run it with --backend local, flyte-local, flyte2-local or kfp-local, or map each step of the body in turn, each over the list "
        "the previous map returned: element i of each list is item i, and il.zip maps two lists together; or "
        "make the body one @il.step (withParam over the body's DAG template is not rendered yet)"
    ),
    "map.fields": (
        "unsupported: take the whole record in the step, an input typed as the dataclass or dict, and map "
        "over the records as they are, without fields=; or run it with --backend local or flyte2-local (the withParam item's "
        "fields are not rendered yet)"
    ),
    "fan_in": "native (tasks.M.outputs.parameters.P: Argo's aggregated list; a map's artifact outputs cannot be "
    "aggregated)",
    "finally": "native (onExit; the step reads {{workflow.status}} and settles the body's status from the run state)",
    "finally.block": "native (the block as a nested DAG, the finally step its task's exit lifecycle hook)",
    "types.model_files": "unsupported: pass the file as its own input and output, an il.Dataset or il.Model, or run "
    "on local, flyte2 or airflow (a dataclass crosses an Argo task as a parameter, without its files)",
    "fallback": "unsupported: run it on flyte2, airflow or local, or catch the error in one step's function "
    "with try/except (a failed pod fails its DAG under failFast, and an emulation would hide the failure from Argo's own status)",
    "finally.block.nested": "native (the inner block's nested DAG inside the outer one's, each with its exit "
    "lifecycle hook)",
    "subpipeline": "native (a nested DAG template per call, its inputs and outputs the values crossing it)",
    "subpipeline.cache": "unsupported as a unit (Argo memoizes templates one by one): the inner steps cache",
    "subpipeline.finally": "native (the call's exit lifecycle hook)",
    "join.run_if": "native (the task's depends expression over its upstreams: Succeeded, Skipped, Omitted, Failed, "
    "Errored; an input from an upstream that made nothing is an expression with a default the step reads as None; "
    "the exit handler records an omitted join as skipped where its rule says so)",
    "skip": "unsupported: a pod cannot end Skipped on Argo (only when and depends skip a task, before it starts); "
    "return an Optional value and test it with il.when, or run on airflow, flyte2 or local",
    "finally.block.reads_output": "native with state_pvc or state_store: the body's step keeps the output in the run "
    "state and the finally step (an exit hook or onExit, which cannot resolve its tasks' outputs) reads it there; "
    "None where none was made",
    "on_failure": "emulated: an exit hook or onExit like il.finally_'s; its shim runs the step only if the scope failed",
    "failure_policy.stop": "native (DAG failFast, Argo's default: nothing new starts after a failure)",
    "failure_policy.continue": "native (failFast: false)",
    "secrets": "native (env from secretKeyRef; values never in the manifest)",
    "labels": "native (template metadata labels and annotations)",
    "queue": "native: queue=kueue: the kueue.x-k8s.io/queue-name label; queue=volcano: schedulerName volcano and "
    "the scheduling.volcano.sh/queue-name annotation",
    "distributed": "native: a resource template creating a Kubeflow Trainer TrainJob (setOwnerReference, "
    "successCondition/failureCondition on its conditions, the step's retryStrategy; resources per node, Kueue "
    "labels on the job, spot, /dev/shm and secrets in the runtime patch); with state_pvc, where the ranks read "
    "artifact inputs (<node>-inputs) and leave the outputs a <node>-outputs task publishes. Argo sees no exit code "
    "of a resource template: a FATAL rank's marker makes each retry's ranks exit at once",
    "trigger.cron": "native (a CronWorkflow: schedules, timezone, concurrencyPolicy Forbid for max_concurrent=1 "
    "else Allow, as Argo cannot cap at N > 1; startingDeadlineSeconds of one period for catch_up, which starts "
    "the latest missed time only; suspend for active=False; inputs as arguments, time_input as "
    "{{workflow.scheduledTime}}; several triggers: a WorkflowTemplate and one CronWorkflow each)",
    "trigger.every": "native (a CronWorkflow scheduled '@every <duration>', counted from the controller's start)",
    "trigger.data": "unsupported (an Argo Events EventSource and Sensor are cluster set-up interlock does not "
    "write: run `interlock watch FILE --backend local`, or use an Airflow Asset with --backend airflow)",
    "trigger.drift": "unsupported (no orchestrator measures drift: run `interlock watch FILE --backend local`)",
    "resume": "unsupported (resubmit: `argo resubmit --memoized` reuses memoized steps)",
}
LOSSY = (
    "finally.block.nested: what follows an inner block in the outer one waits for the inner block's DAG task, "
    "not for its exit hook (Argo starts the dependents beside the hook): a failed inner teardown fails the run "
    "and the outer block's status, but does not stop the outer block's next steps as on the other backends",
    "finally.block.reads_output: a finally step reading an output that Argo served from its memoize cache reads None "
    "(no pod ran to keep it in this run's state)",
    "retry.preempted: a PREEMPTED retry waits the contention backoff of a step that has both (one backoff per template)",
    "cache: memoize entries live in a ConfigMap (1 MiB in all); outputs too large for it are not memoized",
    "distributed: Argo cannot see why a TrainJob failed, so each retry left after a FATAL rank starts pods that "
    "exit at once on the node's marker; a distributed step is not memoized (a resource template has no outputs)",
)


class ArgoBackend:
    """Compile-only: a Workflow, WorkflowTemplate or CronWorkflow manifest (YAML)."""

    name = "argo"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name, features=dict(FEATURES), lossy=LOSSY,
            description="Argo Workflows: compiles to a Workflow / WorkflowTemplate / CronWorkflow built and "
            "validated with hera's models",
            compile_options=ArgoOptions,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        opts = ArgoOptions.of(options)
        if not opts.image and any(not s.image for s in spec.steps):
            log.warning("no image given: steps use %s; compile with image=REGISTRY/IMAGE:TAG", DEFAULT_IMAGE)
        return write(spec, Path(out), opts)
