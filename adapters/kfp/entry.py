"""What runs inside a KFP component: adapt KFP artifacts and parameters to interlock values,
call the runtime shim, and hand the outputs back to KFP.

Every generated component body is two lines that call ``run_node`` with the step's identity
(pipeline ref, node name, code fingerprint). The user's code is imported by module name
from the image (or, under kfp-local, from the parent's ``sys.path``); nothing is inlined.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import StepFailed, StepStopped
from interlock.core.base.status import FailureKind
from interlock.core.model.codecs import from_jsonable
from interlock.core.run.env import RunEnv, state_dir_under
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext

from .names import RUN_ID_ENV, io_names, single_return
from .node_task import NodeTask
from .types import read_artifact, to_parameter, to_value, write_artifact

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec
    from interlock.core.model.spec import StepSpec

log = logging.getLogger("interlock.kfp")

def run_context(spec: PipelineSpec) -> RunContext:
    return run_context_for(spec.name)


def run_context_for(pipeline: str) -> RunContext:
    """The run inside a KFP task, from the environment contract.

    The run id must be stable across KFP retries of a task (FATAL marker, checkpoint key):
    kfp-local passes it; on a cluster it comes from the pod's ``pipeline/runid`` label (see
    policies.apply_task_settings). On a cluster the state root is a shared volume
    (state_pvc): markers and fragments are per run, under the run id known only here.
    """
    seen = RunEnv.read(run_id_env=RUN_ID_ENV)
    run_id = seen.run_id
    if run_id is None:
        import uuid  # a task outside a KFP run only

        run_id = f"kfp-{uuid.uuid4().hex[:12]}"
        log.warning("no run id in the environment; stop markers will not stop KFP retries of this task")
    overrides: dict[str, Any] = {}
    if seen.state_dir is None and seen.state_root is None:
        overrides["state_dir"] = state_dir_under(Path(".interlock"), run_id)
    return RunContext.from_env(pipeline=pipeline, run_id=run_id, backend=seen.backend or "kfp", **overrides)


def load_spec(ref: str) -> PipelineSpec:
    """The pipeline's spec, rebuilt by importing ``ref`` (``interlock.core.model.refs.load_spec``).

    Imported here, not at the top: a task whose component carries its node's slice of the
    spec never needs the loader (nor the pipeline builder it imports).
    """
    from interlock.core.model.refs import load_spec as load

    return load(ref)


def refuse_after_failure(run: RunContext, node: str) -> None:
    """failure_policy="stop" on a cluster: once a step of the run has failed for good (a FATAL
    or spent-budget marker in the run state), a task that has not started does not start.

    It exits non-zero (KFP then skips what depends on it) without writing a fragment, so the
    run's settled status says not-run for it. The items of a map keep going: they are one step.
    """
    from interlock.core.run.records import StopMarker

    failed = [m.node for m in run.state.markers() if m.kind in (StopMarker.FATAL, StopMarker.EXHAUSTED)
              and m.node != node and not m.node.startswith(f"{node}[")]
    if not failed:
        return
    print(f"interlock: {node} not run: step {failed[0]} failed earlier in run {run.run_id} "
          "(failure_policy='stop' starts nothing new after a failure)", file=sys.stderr, flush=True)
    raise SystemExit(1)


# -- the entry point -----------------------------------------------------------------------
def run_node(pipeline_ref: str, node: str, fingerprint: str, args: dict[str, Any], task: str | None = None) -> Any:
    """Execute one node through the shim. Called by the generated component function.

    ``task``: the node's slice of the compiled spec (node_task.py: ``NodeTask.compact()``, or
    its JSON from components compiled before that). With it nothing of the
    pipeline is imported or traced: the step's module is imported when its function is
    called, so a retry the shim refuses (a stop marker) never imports it. Without it (a
    component compiled by an older interlock, a test) the pipeline is loaded from
    ``pipeline_ref`` as before.
    """
    t = NodeTask.loads(task, fingerprint) if task is not None else NodeTask.of(load_spec(pipeline_ref), node)
    step = t.step
    if step.fingerprint != fingerprint:
        _differs(t, fingerprint, step.fingerprint)
    name = node
    if t.map_item is not None:  # il.map: this iteration runs one enumerated item (fanout.py)
        from .fanout import unpack_item  # here: a plain step's task never loads il.map's modules

        knames = io_names(step)[0]
        name, item, zipped = unpack_item(node, args[knames[t.map_item]])
        args = {**args, knames[t.map_item]: item, **{knames[p]: v for p, v in zip(t.map_zipped, zipped, strict=True)}}
    if t.call_item is not None:  # a step of a mapped sub-pipeline's body: one item of the call (submap.py)
        from .submap import CALL_ITEM_ARG, unpack

        knames = io_names(step)[0]
        inner = name  # a step map inside the body: this iteration's own item, under the call's
        name, values = unpack(node, args[CALL_ITEM_ARG])
        if t.map_item is not None:
            from interlock.core.model.submaps import item_name

            name = item_name(node, (*_indices(name, node), *_indices(inner, node)))
        args = {**{k: v for k, v in args.items() if k != CALL_ITEM_ARG},  # fields=: the record, read in prepare
                **{knames[p]: values[i] if isinstance(i, int) else values[0] for p, i in t.call_item.items()}}
    run = run_context_for(t.pipeline)
    if t.stop_after_failure and run.on_cluster:  # kfp-local: the backend itself starts nothing new
        refuse_after_failure(run, node)

    def prepare() -> dict[str, Any]:
        # After the shim's stop-marker check: the step's code as this image has it, then the inputs.
        _check_code(t, fingerprint)
        return node_inputs_of(t, args)

    if t.map_tolerant:  # an item of a tolerant map: its task never fails (fanout.py)
        return _tolerant_item(run, step, name, prepare)
    try:
        # Outputs are written inside the shim: one that cannot be serialized fails the attempt,
        # is classified and stops KFP's retries like any other failure.
        result = execute_step(run, step, name, prepare, write=lambda outputs: write_outputs(step, outputs, args))
    except StepFailed as exc:
        if not _task_process():
            raise  # called in-process (tests, a custom launcher): the caller reports it
        # Once in the task's log, then exit non-zero without Python repeating it all for the
        # exception (KFP reads the exit code). On a cluster the pod log is where a user reads
        # the failure: hint and traceback too. Under kfp-local the CLI reports those, once.
        print(f"interlock: {exc.headline()}", file=sys.stderr, flush=True)
        recorded = exc.failure.traceback if exc.failure else None
        if run.on_cluster:
            if exc.hint:
                print(f"  hint: {exc.hint}", file=sys.stderr, flush=True)
            if recorded:
                print(recorded.rstrip(), file=sys.stderr, flush=True)
        raise SystemExit(exc.exit_code if isinstance(exc, StepStopped) else 1) from None
    return result.written


def _differs(t: NodeTask, compiled: str, found: str) -> None:
    raise StepFailed(
        t.node, FailureKind.FATAL,
        f"the code of step {t.step.name!r} in this image differs from the compiled pipeline "
        f"(fingerprint {found[:12]} != {compiled[:12]})",
        hint="rebuild the image from the same commit, then recompile", pipeline=t.pipeline,
    )


def _check_code(t: NodeTask, compiled: str) -> None:
    """The step this image holds is the one compiled (its code fingerprint), else FATAL."""
    from interlock.core.run.runtime import resolve_function

    resolve_function(t.step)  # imports the step's module; FATAL naming the ref if it cannot
    from interlock.core.model.refs import import_ref

    declared = getattr(import_ref(t.step.ref), "spec", None)  # the il.step as this image decorates it
    found = getattr(declared, "fingerprint", None)
    if found is not None and found != compiled:
        _differs(t, compiled, found)


def _tolerant_item(run: Any, step: StepSpec, name: str, inputs: Any) -> str:
    """Run one item of a tolerant map; its envelope says what came of it. KFP does not retry a
    task that succeeds, so the shim retries every failure kind in-process first."""
    from dataclasses import replace

    from interlock.core.model.codecs import to_jsonable
    from interlock.core.run.records import ALL_KINDS

    from .fanout import envelope_failed, envelope_ok

    port = step.outputs[0] if step.outputs else None

    def envelope(outputs: dict[str, Any]) -> str:
        # Inside the attempt: a value that cannot be serialized fails the item (and is counted
        # against the tolerance) instead of crashing the task after its fragment said success.
        return envelope_ok(to_jsonable(outputs[port.name], port.type) if port is not None else None)

    try:
        result = execute_step(replace(run, retry_in_process=ALL_KINDS), step, name, inputs, write=envelope)
    except StepStopped:
        raise
    except StepFailed as exc:
        print(f"interlock: {exc.headline()} (tolerated by the map unless too many items fail)", file=sys.stderr,
              flush=True)
        return envelope_failed(f"{exc.kind}: {exc.reason}")
    return result.written


def write_outputs(step: StepSpec, outputs: dict[str, Any], args: dict[str, Any]) -> Any:
    """Artifacts to their KFP paths; parameters returned as the component function returns them."""
    _, names_out = io_names(step)
    params: list[Any] = []
    for port in step.outputs:
        value = outputs[port.name]
        kname = names_out[port.name]
        if port.type.is_artifact:
            write_artifact(value, port.type, args[kname])
        else:
            params.append(to_parameter(value, port.type, f"step {step.name!r}, output {port.name!r}"))
    if not params:
        return None
    return params[0] if single_return(step) else tuple(params)


def _task_process() -> bool:
    """True in the task's own process (``python -m kfp.dsl.executor_main``, a pod or a kfp-local
    subprocess), where nothing above run_node catches what it raises."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "kfp.dsl.executor_main"


def node_inputs(spec: PipelineSpec, step: StepSpec, node: str, args: dict[str, Any]) -> dict[str, Any]:
    return node_inputs_of(NodeTask.of(spec, node), args)


def _indices(name: str, node: str) -> tuple[int, ...]:
    """The item indices of ``name`` (``node[1][0]`` -> (1, 0))."""
    return tuple(int(x) for x in name[len(node):].strip("[]").split("][") if x)


def node_inputs_of(t: NodeTask, args: dict[str, Any]) -> dict[str, Any]:
    step, bindings, declared = t.step, t.bindings, t.declared
    names_in, _ = io_names(step)
    inputs: dict[str, Any] = {}
    fields = {p: f for f, p in t.map_fields}  # fields=: every field's port reads the item's record
    fields.update({p: f for p, f in (t.call_item or {}).items() if isinstance(f, str)})
    for port in step.inputs:
        raw = args.get(names_in[port.name])
        if port.name in fields:  # a missing field fails the item here, inside the shim, naming the field
            from interlock.core.model.map_fields import field_of

            record = args.get(names_in[t.map_item]) if t.map_item is not None and t.map_fields else raw
            inputs[port.name] = from_jsonable(field_of(record, fields[port.name], f"node {t.node!r}"), port.type)
            continue
        if port.name in t.map_zipped or (t.call_item and port.name in t.call_item):  # from the enumerated item
            inputs[port.name] = from_jsonable(raw, port.type)
            continue
        if port.name not in declared or (raw is None and port.name not in bindings):
            inputs[port.name] = from_jsonable(port.default, port.type) if port.has_default else None
            continue
        if port.name == t.map_item:
            inputs[port.name] = from_jsonable(raw, port.type)
            continue
        inputs[port.name] = to_value(raw, bindings.get(port.name), port.type, declared[port.name])
    return inputs


# The value conversions live with the KFP codec table (types.py); kept importable from here.
__all__ = ["load_spec", "read_artifact", "run_node", "to_parameter", "to_value", "write_artifact"]
