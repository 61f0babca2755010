"""``il.finally_`` on KFP: the finally step is the exit task of a ``dsl.ExitHandler`` around
the whole body, and receives ``dsl.PipelineTaskFinalStatus``.

KFP allows one exit handler, at the outermost scope. With ``state_pvc`` the run's receipt
task is already that exit task; then the finally step's task takes its place and also
assembles the receipt once its own step has run, so both still happen after the body.

In the task, the shim turns KFP's final status into the portable ``il.RunStatus`` from the
run state (the step fragments, through ``settle``), the same rule as every other backend, so
the finally step sees the same failed steps and error message everywhere.
"""

from __future__ import annotations

from typing import Any

from interlock.core.model.codecs import TypeKind
from interlock.core.model.failure_policy import STOP
from interlock.core.model.finally_blocks import (
    RunStatus,
    block_of,
    block_spec,
    handler_runs,
    is_handler,
    reached,
    status_port,
)
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.spec import BindingKind
from interlock.core.record.outcomes import run_status, settle, with_finally

from .component import NodeComponent, _function_from_source, component_source, declared_inputs
from .names import identifier, io_names
from .policies import KfpOptions, apply_platform_settings, apply_task_settings
from .types import encode

ENTRY = "from interlock.adapters.kfp.entry import run_node\n    return run_node("
STATUS_ARG = "interlock_final_status"  # KFP's final status, for a finally step that declares no il.RunStatus


def finally_source(spec: PipelineSpec, function_name: str, receipt: bool, node: Node | None = None,
                   final_status: bool = True) -> str:
    """The exit task's function: the step's component with its RunStatus input declared as
    KFP's ``PipelineTaskFinalStatus`` (KFP fills it; nothing binds it); without ``final_status``
    a plain input bound to a placeholder, which the shim replaces."""
    node = node or spec.finally_
    assert node is not None
    step = spec.step_of(node)
    names_in, _ = io_names(step)
    source = component_source(spec, node.name, function_name)
    port = status_port(spec, node)
    if not final_status:
        if ENTRY not in source:
            raise AssertionError(f"unexpected component source for the finally step:\n{source}")
        status = names_in[port] if port is not None else STATUS_ARG
    elif port is None:  # a plain cleanup: KFP's status still reaches the shim, under a name of its own
        status = STATUS_ARG
        head = f"def {function_name}("
        if head not in source or ENTRY not in source:
            raise AssertionError(f"unexpected component source for the finally step:\n{source}")
        rest = source.split(head, 1)[1]
        source = source.replace(head, f"{head}{status}: PipelineTaskFinalStatus" + ("" if rest.startswith(")") else ", "), 1)
    else:
        status = names_in[port]
        declared = f"{status}: {_parameter_annotation()}"
        if declared not in source or ENTRY not in source:
            raise AssertionError(f"unexpected component source for the finally step:\n{source}")
        source = source.replace(declared, f"{status}: PipelineTaskFinalStatus", 1)
    params = "".join(f", {p.name!r}: {_param_arg(p.name)}" for p in spec.params) if receipt else ""
    extra = f"{{{params[2:]}}}" if receipt else "None"
    if receipt:  # the pipeline's parameters too, for the receipt (declared after the step's inputs)
        head, _, rest = source.partition(")")
        sig = ", ".join(f"{_param_arg(p.name)}: {_pipeline_param_type(p)}" for p in spec.params)
        source = f"{head}{', ' if sig and not head.endswith('(') else ''}{sig}){rest}"
    return source.replace(
        ENTRY, f"from interlock.adapters.kfp.finally_task import run_finally\n    return run_finally({status!r}, {extra}, ", 1,
    )


def _parameter_annotation() -> str:
    return "dict"  # a dataclass parameter (RunStatus) is a KFP STRUCT


def _param_arg(name: str) -> str:
    return f"interlock_param_{name}"


def _pipeline_param_type(p: Any) -> str:
    from .types import kfp_type

    return str(kfp_type(p.type).parameter)


def make_finally_task(spec: PipelineSpec, values: dict[str, Any], opts: KfpOptions,
                      node: Node | None = None, final_status: bool = True) -> tuple[Any, NodeComponent]:
    """Create the exit task (inside the pipeline body, before the ExitHandler block): the whole
    pipeline's finally step, or ``node``, a block's. Without ``final_status`` (a nested block's
    task, no exit task) the status input is a plain one the shim fills from the run state."""
    from kfp import dsl

    node = node or spec.finally_
    assert node is not None
    step = spec.step_of(node)
    fname = f"{identifier(node.name)}_finally"
    receipt = bool(opts.state_pvc) and node is spec.finally_
    source = finally_source(spec, fname, receipt, node, final_status)
    fn = _function_from_source(source, fname, f"<interlock-kfp {spec.name}/{node.name} (finally)>")
    from .component import DEFAULT_IMAGE

    comp = dsl.component(fn, base_image=step.image or opts.image or DEFAULT_IMAGE, install_kfp_package=False)
    names_in, names_out = io_names(step)
    status = status_port(spec, node) if final_status else None
    bindings = node.bindings
    kwargs: dict[str, Any] = {}
    for port_name, t in declared_inputs(spec, node.name).items():
        if port_name == status:
            continue
        b = bindings.get(port_name)
        if b is not None and b.kind is BindingKind.PARAM:
            kwargs[names_in[port_name]] = values[b.param or ""]
            continue
        port = step.input(port_name)
        value = b.value if b is not None else (port.default if port is not None else None)
        if t.kind is TypeKind.FLOAT and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        kwargs[names_in[port_name]] = encode(value, t)
    if receipt:
        kwargs.update({_param_arg(p.name): values[p.name] for p in spec.params})
    task = comp(**kwargs)
    apply_task_settings(task, spec, step, opts, display_name=node.name)
    apply_platform_settings(task, spec, step, opts)
    task.set_caching_options(enable_caching=False)  # a finally step runs on every run
    return task, NodeComponent(node.name, fname, source, comp, names_in, names_out)


def run_finally(status_arg: str, params: dict[str, Any] | None, pipeline_ref: str, node: str, fingerprint: str,
                args: dict[str, Any], task: str | None = None) -> Any:
    """In the exit task: the body's RunStatus from the run state, then the step through the shim
    (and, with a state volume, the receipt)."""
    from interlock.core.model.codecs import to_jsonable
    from interlock.core.model.types import type_of

    from .entry import load_spec, run_context, run_node

    spec = load_spec(pipeline_ref)
    final = args.get(status_arg)
    state = str(getattr(final, "state", "") or "")
    kfp_failed = state.upper() in ("FAILED", "ERROR")
    block = block_of(spec, node)  # a block's exit task: the block's status (KFP's state is the group's)
    scope = block_spec(spec, block) if block is not None else spec
    run = run_context(spec)
    outcome = settle(scope, run.state, None, failed=f"KFP reported the run {state}" if kfp_failed else None)
    if block is not None and spec.failure_policy == STOP and run.on_cluster and not reached(spec, block, outcome.steps):
        # KFP starts every exit task; under "stop" a block the run never entered runs no finally step.
        from .entry import refuse_after_failure

        refuse_after_failure(run, node)
    status = run_status(outcome)
    print(f"interlock: finally step {node!r} sees the run {status.status}", flush=True)
    if status_port(spec, spec.node(node)) is None:
        args = {k: v for k, v in args.items() if k != status_arg}
    else:
        args = {**args, status_arg: to_jsonable(status, type_of(RunStatus))}
    try:
        if is_handler(spec, node) and not handler_runs(status):  # il.on_failure: KFP runs every exit task
            print(f"interlock: failure handler {node!r} not run: the run {status.status}", flush=True)
            return None
        return run_node(pipeline_ref, node, fingerprint, args, task)
    finally:
        if params is not None:
            from .receipt_task import finish_run

            finish_run(pipeline_ref, params, state)


def outside_blocks(spec: PipelineSpec, outputs: list[Any]) -> list[Any]:
    """Pipeline outputs KFP can declare: none from inside an exit handler (KFP refuses them;
    kfp-local still returns them)."""
    from interlock.core.model.finally_blocks import is_call_finally

    # A sub-pipeline call's own finally is no ExitHandler around what the caller reads: a call whose
    # outputs are read runs its finally after its body (subpipeline._after_body).
    inside = {m for b in spec.finally_blocks if not is_call_finally(spec, b) for m in b.members}
    return [(k, b) for k, b in outputs if not (b.nodes() & inside)]


def check_blocks(spec: PipelineSpec, opts: KfpOptions, call: Any = None) -> None:
    """Refuse the ``with il.finally_`` blocks of one scope (the top level, or a sub-pipeline call's
    component) that KFP cannot express: one inside another exit handler (KFP allows exit handlers
    at the outermost scope only) where it cannot run after its tasks instead (a sub-pipeline call's own
    finally), or a block whose tasks a step outside it reads."""
    from interlock.core.base.errors import PipelineDefinitionError
    from interlock.core.model.finally_blocks import blocks_in

    for block in blocks_in(spec, getattr(call, "name", None)):
        if without_handler(spec, block, opts):  # inside another exit handler: close_nested renders it
            continue
        whole = call.finally_ if call is not None else spec.finally_
        if whole is not None or (opts.state_pvc and call is None):
            outer = (f"sub-pipeline call {call.name!r}'s il.finally_" if call is not None
                     else "the whole pipeline's il.finally_" if whole is not None else "state_pvc's receipt handler")
            raise PipelineDefinitionError(
                f"il.finally_ around a block inside {outer}: KFP allows exit handlers at the outermost scope only",
                pipeline=spec.name, step=block.node.name,
                hint="on KFP use either the whole pipeline's finally step or finally steps around blocks"
                + ("" if whole is not None else ", or compile without state_pvc (state_store=URI)"),
            )
        members = set(block.members)
        for n in spec.nodes:
            reads = sorted((n.upstream() | set(n.after)) & members)
            if n.name not in members and reads:
                raise PipelineDefinitionError(
                    f"reads {reads[0]!r} from inside an il.finally_ block: KFP refuses a dependency on a task "
                    "inside a dsl.ExitHandler from outside it",
                    pipeline=spec.name, step=n.name,
                    hint="move this step into the `with il.finally_(...):` block, or return the value as a "
                    "pipeline output",
                )


def open_block(spec: PipelineSpec, block: Any, values: dict[str, Any], opts: KfpOptions,
               components: dict[str, NodeComponent], task_names: dict[str, str]) -> Any:
    """``with il.finally_(step): ...`` on KFP: enter a ``dsl.ExitHandler`` whose exit task is the
    finally step; the caller emits the block's tasks in it, then leaves it. None for a block
    nested in another: KFP allows no exit handler inside one (close_nested)."""
    from kfp import dsl

    if without_handler(spec, block, opts):
        return None
    exit_task, comp = make_finally_task(spec, values, opts, block.node)
    components[comp.node] = comp
    task_names[exit_task.name] = comp.node
    handler = dsl.ExitHandler(exit_task, name=f"{block.node.name}-block")
    handler.__enter__()
    return handler


def close_nested(spec: PipelineSpec, block: Any, values: dict[str, Any], tasks: dict[str, Any], opts: KfpOptions,
                 components: dict[str, NodeComponent], task_names: dict[str, str]) -> None:
    """A block nested in another, once its tasks exist: the finally step's task after every one of
    them with ``.ignore_upstream_failure()`` (KFP's other form of an exit task: it starts when they
    are done, whatever their outcome), and what the outer block reads from the block after that
    task (``.after``), as an inner ``finally:`` ends before the outer body goes on. It takes no
    ``PipelineTaskFinalStatus`` (KFP hands one to a task with one upstream only): the shim settles
    the block's status from the run state, as every exit task's."""
    task, comp = make_finally_task(spec, values, opts, block.node, final_status=False)
    components[comp.node] = comp
    task_names[task.name] = comp.node
    members = set(block.members)
    task.after(*(tasks[m] for m in block.members if m in tasks)).ignore_upstream_failure()
    tasks[block.node.name] = task
    for n in spec.nodes:  # readers emitted later wait for it too (after_nested)
        if n.name not in members and n.upstream() & members and n.name in tasks:
            tasks[n.name].after(task)


def after_nested(spec: PipelineSpec, node: str, task: Any, tasks: dict[str, Any], opts: KfpOptions) -> None:
    """A task that reads a block rendered without an exit handler (close_nested) from outside it
    waits for that block's finally task."""
    n = spec.node(node)
    for block in spec.finally_blocks:
        fin = tasks.get(block.node.name)
        if fin is not None and node not in block.members and without_handler(spec, block, opts) \
                and n.upstream() & set(block.members):
            task.after(fin)


def without_handler(spec: PipelineSpec, block: Any, opts: KfpOptions) -> bool:
    """Is this ``with il.finally_`` block inside another exit handler (an outer block's, the whole
    pipeline's il.finally_, state_pvc's receipt task)? KFP allows none inside another: its finally
    task then runs after its tasks with ``.ignore_upstream_failure()`` (close_nested)."""
    from interlock.core.model.finally_blocks import block_call, is_call_finally, outer_block

    if is_call_finally(spec, block):
        return False
    if outer_block(spec, block) is not None:
        return True
    return block_call(spec, block) is None and (spec.finally_ is not None or bool(opts.state_pvc))


__all__ = ["check_blocks", "open_block", "RunStatus", "make_finally_task", "run_finally", "with_finally"]
