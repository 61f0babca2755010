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

from interlock.core.finally_ import RunStatus, run_status, status_port, with_finally
from interlock.core.runstate import settle
from interlock.core.spec import BindingKind, PipelineSpec
from interlock.core.types import TypeKind

from .component import NodeComponent, _function_from_source, component_source, declared_inputs
from .names import identifier, io_names
from .policies import KfpOptions, apply_platform_settings, apply_task_settings
from .types import encode

ENTRY = "from interlock.adapters.kfp.entry import run_node\n    return run_node("


def finally_source(spec: PipelineSpec, function_name: str, receipt: bool) -> str:
    """The exit task's function: the step's component with its RunStatus input declared as
    KFP's ``PipelineTaskFinalStatus`` (KFP fills it; nothing binds it)."""
    node = spec.finally_
    assert node is not None
    step = spec.step_of(node)
    names_in, _ = io_names(step)
    source = component_source(spec, node.name, function_name)
    status = names_in[status_port(spec, node)]
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


def make_finally_task(spec: PipelineSpec, values: dict[str, Any], opts: KfpOptions) -> tuple[Any, NodeComponent]:
    """Create the exit task (inside the pipeline body, before the ExitHandler block)."""
    from kfp import dsl

    node = spec.finally_
    assert node is not None
    step = spec.step_of(node)
    fname = f"{identifier(node.name)}_finally"
    receipt = bool(opts.state_pvc)
    source = finally_source(spec, fname, receipt)
    fn = _function_from_source(source, fname, f"<interlock-kfp {spec.name}/{node.name} (finally)>")
    from .component import DEFAULT_IMAGE

    comp = dsl.component(fn, base_image=step.image or opts.image or DEFAULT_IMAGE, install_kfp_package=False)
    names_in, names_out = io_names(step)
    status = status_port(spec, node)
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
                args: dict[str, Any]) -> Any:
    """In the exit task: the body's RunStatus from the run state, then the step through the shim
    (and, with a state volume, the receipt)."""
    from interlock.core.codecs import to_jsonable
    from interlock.core.types import type_of

    from .entry import load_spec, run_context, run_node

    spec = load_spec(pipeline_ref)
    final = args.get(status_arg)
    state = str(getattr(final, "state", "") or "")
    kfp_failed = state.upper() in ("FAILED", "ERROR")
    outcome = settle(spec, run_context(spec).state, None, failed=f"KFP reported the run {state}" if kfp_failed else None)
    status = run_status(outcome)
    print(f"interlock: finally step {node!r} sees the run {status.status}", flush=True)
    args = {**args, status_arg: to_jsonable(status, type_of(RunStatus))}
    try:
        return run_node(pipeline_ref, node, fingerprint, args)
    finally:
        if params is not None:
            from .receipt_task import finish_run

            finish_run(pipeline_ref, params, state)


__all__ = ["RunStatus", "make_finally_task", "run_finally", "with_finally"]
