"""PipelineSpec -> a kfp v2 pipeline (GraphComponent) -> IR YAML.

The pipeline function is built at run time: its signature is the interlock pipeline's
parameters (kfp reads it with ``inspect.signature``), and its body renders the lowered plan
(core/backend/plan.py): one task per step, a ``dsl.If`` per ``il.when`` block, a nested
pipeline component per sub-pipeline call, a ``dsl.ExitHandler`` per ``il.finally_`` block.
kfp checks every edge while the body runs (``InconsistentTypeException``); interlock already
did, so a kfp refusal here is reported as a definition error naming the node.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.backend.plan import Block, Call, Chain, FinallyScope, Step, Unit, lower
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.chains import own_condition
from interlock.core.model.codecs import TypeKind
from interlock.core.model.conditions import COMPARISONS, Cond, Op, condition_of
from interlock.core.model.graph import binding_type
from interlock.core.model.pipeline_spec import Gate, PipelineSpec
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.types import TypeSpec

from . import fanout
from .component import DEFAULT_IMAGE, NodeComponent, declared_inputs, make_components
from .names import SINGLE, kfp_pipeline_name
from .policies import KfpOptions, apply_platform_settings, apply_task_settings, check_durable_state
from .types import encode, json_text, kfp_type

_PY_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}


@dataclass
class BuiltPipeline:
    """The kfp pipeline plus what the local backend needs to map kfp tasks back to nodes."""

    pipeline: Any  # kfp GraphComponent
    components: dict[str, NodeComponent]
    task_names: dict[str, str]  # kfp task name -> node name
    selectors: dict[str, str]  # kfp task name of a gate-field selector -> gate id


def _param_annotation(t: TypeSpec) -> Any:
    kt = kfp_type(t)
    if kt.is_artifact:
        raise PipelineDefinitionError(f"pipeline parameters cannot be artifacts ({t.describe()})")
    return _PY_TYPES[kt.parameter or "str"]


def _signature(spec: PipelineSpec) -> inspect.Signature:
    params = []
    for p in spec.params:
        default = encode(p.default, p.type) if p.has_default else inspect.Parameter.empty
        params.append(inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=_param_annotation(p.type)))
    # Parameters with defaults must follow those without, as in any Python signature.
    params.sort(key=lambda q: q.default is not inspect.Parameter.empty)
    return inspect.Signature(params)


def build_pipeline(spec: PipelineSpec, opts: KfpOptions | None = None) -> BuiltPipeline:
    from .setter_stack import setters_without_source

    with setters_without_source():  # kfp's task setters would read every frame's source (setter_stack.py)
        return _build_pipeline(spec, opts)


def _build_pipeline(spec: PipelineSpec, opts: KfpOptions | None) -> BuiltPipeline:
    from kfp import dsl

    opts = opts or KfpOptions()
    if spec.subs:  # what KFP cannot render of il.map over a sub-pipeline, before kfp sees it
        from .submap import check as check_mapped_calls

        check_mapped_calls(spec)
    launchers: dict[str, dict[str, Any]] = {}
    if any(s.distributed is not None for s in spec.steps):  # the launcher's modules cost 70 ms to import
        from .distributed import job_templates

        launchers = job_templates(spec, opts)
    components = make_components(spec, image=opts.image, launchers=launchers)
    signature = _signature(spec)
    order = [p.name for p in signature.parameters.values()]
    task_names: dict[str, str] = {}
    selectors: dict[str, str] = {}

    # KFP refuses pipeline outputs produced inside an ExitHandler (the receipt task's or
    # il.finally_'s block).
    outputs = [] if opts.state_pvc or spec.finally_ else exported_outputs(spec)
    if spec.finally_blocks:  # nor from inside an il.finally_ block's ExitHandler
        from .finally_task import outside_blocks

        outputs = outside_blocks(spec, outputs)
    ReturnType = _return_type(spec, outputs)
    plan = lower(spec)
    calls: dict[str, Any] = {}
    if spec.subs:  # each sub-pipeline call as a pipeline component, innermost first (subpipeline.py)
        from .subpipeline import build_calls

        calls = build_calls(plan, components, selectors, opts, task_names)

    def body(*args: Any) -> Any:
        values = dict(zip(order, args, strict=True))
        tasks: dict[str, Any] = {}
        handler = None
        if spec.finally_ is not None:
            # il.finally_: its step is the exit task (with state_pvc it also writes the receipt).
            from .finally_task import make_finally_task

            exit_task, comp = make_finally_task(spec, values, opts)
            components[comp.node] = comp
            task_names[exit_task.name] = comp.node
            handler = dsl.ExitHandler(exit_task, name="interlock-finally")
            handler.__enter__()
        elif opts.state_pvc:
            # Fragments outlive pods on the state volume: assemble the receipt at exit.
            from .receipt_task import make_receipt_task

            handler = dsl.ExitHandler(make_receipt_task(spec, values, opts), name="interlock-run")
            handler.__enter__()
        from .finally_task import check_blocks

        check_blocks(spec, opts)
        emit_units(spec, plan.units, values, tasks, components, selectors, opts, task_names, calls)
        if handler is not None:
            handler.__exit__(None, None, None)
        if outputs:
            values_out = [_value(b, values, tasks, components) for _, b in outputs]
            return ReturnType(*values_out) if ReturnType is not None else values_out[0]
        return None

    if outputs:
        signature = signature.replace(return_annotation=ReturnType or _output_annotation(spec, outputs[0][0]))
    body.__signature__ = signature  # type: ignore[attr-defined]
    body.__name__ = spec.name.replace("-", "_")
    body.__doc__ = spec.doc or f"interlock pipeline {spec.name}"
    try:
        pipeline = dsl.pipeline(name=kfp_pipeline_name(spec.name), description=spec.doc or None,
                                pipeline_root=opts.pipeline_root)(body)
    except PipelineDefinitionError:
        raise
    except Exception as exc:  # kfp's InconsistentTypeException, TypeError, ValueError...
        raise PipelineDefinitionError(f"kfp refused the pipeline: {exc}", pipeline=spec.name) from exc
    return BuiltPipeline(pipeline, components, task_names, selectors)


def emit_units(
    spec: PipelineSpec, units: tuple[Unit, ...], values: dict[str, Any], tasks: dict[str, Any],
    components: dict[str, NodeComponent], selectors: dict[str, str], opts: KfpOptions,
    task_names: dict[str, str], calls: dict[str, Any],
) -> None:
    """Create the tasks of one scope's units (core/backend/plan.py) in the current pipeline body.

    An il.when block is a ``dsl.If`` (a conjunction: one nested ``dsl.If`` per term, as KFP joins
    nested conditions with &&), a chain ``dsl.If``/``dsl.Elif``/``dsl.Else``, a sub-pipeline call
    one task of its nested pipeline component (subpipeline.py), an il.finally_ block a
    ``dsl.ExitHandler`` whose exit task is the finally step (finally_task.py).
    """
    from kfp import dsl

    for u in units:
        if isinstance(u, Step):
            _emit_step(spec, u, values, tasks, components, opts, task_names)
        elif isinstance(u, Block):
            conditions = _conditions(spec, u.gate, values, tasks, components, selectors, opts)
            opened = []
            for i, op in enumerate(conditions):
                cm = dsl.If(op, name=u.key if i == 0 else f"{u.key}-{i + 1}")
                cm.__enter__()
                opened.append(cm)
            emit_units(spec, u.units, values, tasks, components, selectors, opts, task_names, calls)
            _close(spec, (u.key, opened), values, tasks, components, opts)
        elif isinstance(u, Chain):
            for block in u.blocks:
                if not block.units:  # a block that holds nothing opens no scope
                    continue
                cm = _chain_scope(spec, block.gate, values, tasks, components, selectors, opts)
                cm.__enter__()
                emit_units(spec, block.units, values, tasks, components, selectors, opts, task_names, calls)
                _close(spec, (block.key, [cm]), values, tasks, components, opts)
        elif isinstance(u, Call):
            from .subpipeline import emit_call

            emit_call(spec, u, calls[u.call.name], values, tasks, components, opts, task_names)
        elif isinstance(u, FinallyScope):
            from .finally_task import close_nested, open_block

            handler = open_block(spec, u.block, values, opts, components, task_names)
            emit_units(spec, u.units, values, tasks, components, selectors, opts, task_names, calls)
            if handler is None:  # nested in another block: no exit handler there (finally_task.close_nested)
                close_nested(spec, u.block, values, tasks, opts, components, task_names)
            else:
                handler.__exit__(None, None, None)


def _emit_step(spec: PipelineSpec, u: Step, values: dict[str, Any], tasks: dict[str, Any],
               components: dict[str, NodeComponent], opts: KfpOptions, task_names: dict[str, str]) -> None:
    node = u.node
    if node.map is not None:  # il.map: ParallelFor over the list, readers get Collected
        items = _value(node.bindings[node.map.item], values, tasks, components)
        carried: dict[str, tuple[Any, TypeSpec]] = {}
        if opts.local_conditions:  # kfp-local: broadcast step outputs through the loop item
            comp = components[node.name]
            declared = comp.declared if comp.declared is not None else declared_inputs(spec, node.name)
            carried = {port: (_value(node.bindings[port], values, tasks, components), t)
                       for port, t in fanout.carried_inputs(spec, node.name, declared).items()}
        zipped = tuple(_value(node.bindings[p], values, tasks, components) for p in node.map.zipped)
        loop, item, enum = fanout.open_loop(spec, node.name, items, opts.image or DEFAULT_IMAGE, carried, zipped)
        task_names[fanout.ENUMERATED + enum.name] = node.name  # kfp-local reads the list's length from it
        fields = {port: getattr(item, fanout.carried_key(k)) for k, port in enumerate(carried)}
        task = _task(spec, node.name, {**values, fanout.ENUMERATE: item, fanout.CARRIED: fields}, tasks,
                     components, opts)
        loop.__exit__(None, None, None)
        tasks[node.name] = fanout.collect(spec, node.name, task, opts.image or DEFAULT_IMAGE)
    else:
        task = tasks[node.name] = _task(spec, node.name, values, tasks, components, opts)
    if spec.finally_blocks:  # what reads a block inside another exit handler waits for its finally task
        from .finally_task import after_nested

        after_nested(spec, node.name, task, tasks, opts)
    task_names[task.name] = node.name


def exported_outputs(spec: PipelineSpec) -> list[tuple[str, Binding]]:
    """Pipeline outputs KFP can declare: whole outputs of nodes outside any il.when block.

    A field of a dataclass output cannot be a KFP pipeline output; it stays available
    through the producing task's output (kfp-local still returns it).
    """
    return [
        (name, b) for name, b in spec.outputs
        if (b.kind is BindingKind.OUTPUT and not b.field and spec.node(b.node or "").gate is None)
        or b.kind is BindingKind.ONE_OF
    ]


def _output_annotation(spec: PipelineSpec, name: str) -> Any:
    from kfp import dsl

    t = dict(spec.output_types)[name]
    kt = kfp_type(t)
    if kt.is_artifact:
        return getattr(dsl, kt.artifact or "Artifact")
    return _PY_TYPES[kt.parameter or "str"]


def _return_type(spec: PipelineSpec, outputs: list[tuple[str, Binding]]) -> Any:
    if len(outputs) == 1 and outputs[0][0] == "o0":
        return None  # one plain output: KFP's "Output"
    return typing.NamedTuple("Outputs", [(name, _output_annotation(spec, name)) for name, _ in outputs])


def _value(b: Binding, values: dict[str, Any], tasks: dict[str, Any], components: dict[str, NodeComponent]) -> Any:
    if b.kind is BindingKind.PARAM:
        return values[b.param or ""]
    if b.kind is BindingKind.OUTPUT:
        src = components[b.node or ""]
        return tasks[b.node or ""].outputs[src.outputs[b.port or ""]]
    if b.kind is BindingKind.ONE_OF:  # il.branch_value: one dsl.OneOf however often it is read
        from kfp import dsl

        memo = one_of_memo(b)
        if memo not in tasks:
            # A nested chain's value is an option through its block's pass-through task (_close):
            # KFP refuses a dsl.OneOf inside another.
            tasks[memo] = dsl.OneOf(*(tasks[_PASS + o.describe()] if _PASS + o.describe() in tasks
                                      else _value(o, values, tasks, components) for o in b.options))
        return tasks[memo]
    if b.kind is BindingKind.LIST:  # a step input gets a gather task (_gather); anything else cannot
        raise PipelineDefinitionError(
            f"{b.describe()}: KFP cannot pass a list of task outputs here",
            hint="pass the list to a step (a gather task collects it), or produce the parts with il.map",
        )
    return b.value


def from_call(tasks: dict[str, Any], node: str | None) -> bool:
    """Is the node's output read through a sub-pipeline call's output (not named "Output")?"""
    from .subpipeline import _Outputs

    return isinstance(tasks.get(node or ""), _Outputs)


def one_of_memo(b: Binding) -> str:
    """Where a branch value's dsl.OneOf is kept among the tasks (one per value)."""
    return "\0one-of:" + b.describe()


def _task(
    spec: PipelineSpec, node_name: str, values: dict[str, Any], tasks: dict[str, Any],
    components: dict[str, NodeComponent], opts: KfpOptions,
) -> Any:
    comp = components[node_name]
    node = spec.node(node_name)
    step = spec.step(node.step)
    bindings = node.bindings
    kwargs: dict[str, Any] = {}
    for port_name, declared in (comp.declared if comp.declared is not None else declared_inputs(spec, node_name)).items():
        port = step.input(port_name)
        assert port is not None
        b = bindings.get(port_name)
        if node.map is not None and port_name == node.map.item:
            kwargs[comp.inputs[port_name]] = values[fanout.ENUMERATE]
            continue
        if node.map is not None and port_name in values.get(fanout.CARRIED, {}):
            kwargs[comp.inputs[port_name]] = values[fanout.CARRIED][port_name]
            continue
        if b is not None and b.kind is BindingKind.LIST:  # fan-in from a list written in the body
            kwargs[comp.inputs[port_name]] = _gather(spec, node_name, port_name, declared, b, values, tasks,
                                                     components, opts)
            continue
        if b is not None and b.kind is not BindingKind.CONST:
            kwargs[comp.inputs[port_name]] = _value(b, values, tasks, components)
            continue
        value = b.value if b is not None else port.default
        if declared.kind is TypeKind.FLOAT and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # a literal int for a float port
        if value is None and not json_text(declared):
            continue  # an Optional artifact left at None: the component's own default
        kwargs[comp.inputs[port_name]] = encode(value, declared)
    from .submap import CALL_ITEM, CALL_ITEM_ARG, around

    if around(spec, node_name) is not None:  # a step of a mapped sub-pipeline's body: the call's item (submap.py)
        kwargs[CALL_ITEM_ARG] = values[CALL_ITEM]
    try:
        task = comp.component(**kwargs)
    except Exception as exc:
        raise PipelineDefinitionError(f"kfp refused the task: {exc}", pipeline=spec.name, step=node_name) from exc
    for upstream in node.after:
        before = getattr(tasks[upstream], "task", tasks[upstream])  # a sub-pipeline's output: its call task
        if before is not None:  # None: a node outside this sub-pipeline's component, ordered by its call
            task.after(before)
    if step.distributed is not None:  # the task launches the job; the ranks get the step's resources
        from .distributed import apply_launcher_settings

        apply_launcher_settings(task, spec, step, opts, display_name=node_name)
        return task
    apply_task_settings(task, spec, step, opts, display_name=node_name)
    apply_platform_settings(task, spec, step, opts)
    return task


_PASS = "\0pass:"


def _close(spec: PipelineSpec, scope: tuple[str, list[Any]], values: dict[str, Any], tasks: dict[str, Any],
           components: dict[str, NodeComponent], opts: KfpOptions) -> None:
    """Leave an il.when block's dsl.If scopes. Before that, an option of a branch value that
    dsl.OneOf cannot take as it is (a nested chain's value, an il.map's output: _nested_values)
    goes through a small pass-through task in the block, which the dsl.OneOf reads."""
    from interlock.core.model.chains import spec_option_gate

    gate_id, cms = scope
    if "\0nested" not in tasks:  # once per build: compiling N blocks stays linear
        tasks["\0nested"] = _nested_values(spec)
    for nested in tasks["\0nested"]:
        if spec_option_gate(spec, nested) != gate_id or _PASS + nested.describe() in tasks:
            continue
        t = binding_type(spec, nested)
        kt = kfp_type(t) if t is not None else None
        if kt is None or kt.is_artifact:
            raise PipelineDefinitionError(
                f"{nested.describe()} is an option of an il.branch_value: on KFP it passes through a task, "
                "which takes parameters only, not artifacts",
                pipeline=spec.name, hint="produce the artifact in a step of the outer block from the nested value",
            )
        from .component import _function_from_source

        fname = "pass_value"
        source = f"def {fname}(value: {kt.parameter}) -> {kt.parameter}:\n    return value\n"
        comp = dsl_component(_function_from_source(source, fname, f"<interlock-kfp pass-through {kt.parameter}>"),
                             opts.image or DEFAULT_IMAGE)
        task = comp(value=_value(nested, values, tasks, components))
        task.set_display_name(f"{gate_id}-value")
        tasks[_PASS + nested.describe()] = task.output
    for cm in reversed(cms):
        cm.__exit__(None, None, None)


def dsl_component(fn: Any, image: str) -> Any:
    from kfp import dsl

    return dsl.component(fn, base_image=image, install_kfp_package=False)


def _nested_values(spec: PipelineSpec) -> list[Binding]:
    """Options of a branch value that dsl.OneOf cannot take as they are, so each goes through
    a pass-through task in its block: the value of a chain nested in the block (KFP refuses a
    OneOf inside another) and an il.map's output (a ParallelFor's Collected, which OneOf refuses)."""
    found: list[Binding] = []
    todo = [b for n in spec.nodes for _, b in n.inputs] + [b for _, b in spec.outputs]
    todo += [i for b in list(todo) for i in b.items]
    while todo:
        b = todo.pop()
        if b.kind is BindingKind.ONE_OF:
            for o in b.options:
                if o not in found and (o.kind is BindingKind.ONE_OF or _mapped_output(spec, o)):
                    found.append(o)
                    todo.append(o)
    return found


def _mapped_output(spec: PipelineSpec, b: Binding) -> bool:
    return b.kind is BindingKind.OUTPUT and spec.node(b.node or "").map is not None


def _gather(spec: PipelineSpec, node_name: str, port: str, declared: TypeSpec, b: Binding, values: dict[str, Any],
            tasks: dict[str, Any], components: dict[str, NodeComponent], opts: KfpOptions) -> Any:
    """A literal list of outputs, parameters and constants, through a gather task (fanout.gather)."""
    from interlock.core.model.fanout import element_of

    elem = element_of(declared) or TypeSpec(TypeKind.STR)
    items: list[tuple[Any, TypeSpec]] = []
    for item in b.items:
        if item.kind is BindingKind.CONST:
            items.append((encode(item.value, elem), elem))
            continue
        if item.kind is BindingKind.OUTPUT and item.field:
            raise PipelineDefinitionError(
                f"{item.describe()} in a list: KFP passes whole task outputs, not a field of a dataclass",
                pipeline=spec.name, step=node_name, port=port, hint="return the field as its own output",
            )
        t = binding_type(spec, item) if item.kind is not BindingKind.ONE_OF else binding_type(spec, item.options[0])
        items.append((_value(item, values, tasks, components), t or elem))
    return fanout.gather(spec, node_name, port, declared, items, opts.image or DEFAULT_IMAGE)


def _chain_scope(
    spec: PipelineSpec, gate: Gate, values: dict[str, Any], tasks: dict[str, Any],
    components: dict[str, NodeComponent], selectors: dict[str, str], opts: KfpOptions,
) -> Any:
    """dsl.If / dsl.Elif / dsl.Else for one block of a chain (each takes one comparison)."""
    from kfp import dsl

    own = own_condition(gate)
    if own is None:
        return dsl.Else(name=gate.id)
    terms = kfp_conjunction(spec, Gate(gate.id, gate.condition, gate.parent, own))
    if len(terms) != 1:
        raise PipelineDefinitionError(
            f"il.when/il.elif_({own.describe()}): a KFP dsl.If/dsl.Elif of a chain takes one comparison",
            pipeline=spec.name, hint="compute the combined flag in a step, or nest an il.when inside the branch",
        )
    if gate.expr is None and gate.follows is None:  # a plain il.when(flag) heading the chain
        op = _condition(spec, gate, tasks, components, selectors, opts) == True  # noqa: E712 - a kfp condition
    else:
        op = _operation(spec, gate, terms[0], values, tasks, components, selectors, opts)
    return (dsl.Elif if gate.follows is not None else dsl.If)(op, name=gate.id)


def _conditions(
    spec: PipelineSpec, gate: Gate, values: dict[str, Any], tasks: dict[str, Any],
    components: dict[str, NodeComponent], selectors: dict[str, str], opts: KfpOptions,
) -> list[Any]:
    """The gate's condition as KFP condition operations, to be nested (their conjunction)."""
    if gate.expr is None:  # plain il.when(flag): as before, through a selector where needed
        return [_condition(spec, gate, tasks, components, selectors, opts) == True]  # noqa: E712 - a kfp condition
    return [_operation(spec, gate, term, values, tasks, components, selectors, opts)
            for term in kfp_conjunction(spec, gate)]


def _operation(
    spec: PipelineSpec, gate: Gate, term: Cond, values: dict[str, Any], tasks: dict[str, Any],
    components: dict[str, NodeComponent], selectors: dict[str, str], opts: KfpOptions,
) -> Any:
    def operand(b: Binding) -> Any:
        if b.kind is BindingKind.OUTPUT and (b.field or (opts.local_conditions and (
                components[b.node or ""].outputs[b.port or ""] != SINGLE or from_call(tasks, b.node)))):
            kind = (binding_type(spec, b) or TypeSpec("str")).kind
            if kind is TypeKind.BOOL:
                return _condition(spec, Gate(gate.id, b), tasks, components, selectors, opts)
            if not b.field:  # kfp-local resolves conditions only on outputs named "Output"
                return _pass_through(gate, kind, _value(b, values, tasks, components), selectors)
        return _value(b, values, tasks, components)

    if term.op is Op.REF:
        return operand(term.operands[0]) == True  # noqa: E712 - a kfp condition
    if term.op is Op.NOT:  # NOT(REF) after without_not()
        return operand(term.terms[0].operands[0]) == False  # noqa: E712 - a kfp condition
    left, right = (operand(b) for b in term.operands)
    return COMPARISONS[term.op](left, right)


def _pass_through(gate: Gate, kind: TypeKind, channel: Any, selectors: dict[str, str]) -> Any:
    from . import selector

    component = {TypeKind.INT: selector.as_int, TypeKind.FLOAT: selector.as_float}.get(kind, selector.as_str)
    pick = component(value=channel)
    pick.set_caching_options(enable_caching=False)
    pick.set_display_name(f"{gate.id}-condition")
    selectors[pick.name] = gate.id
    return pick.output


def kfp_conjunction(spec: PipelineSpec, gate: Gate) -> list[Cond]:
    """The terms of a condition KFP can express: a conjunction of comparisons (no `|`)."""
    cond = (gate.expr if gate.expr is not None else condition_of(gate)).without_not()
    terms = list(cond.terms) if cond.op is Op.AND else [cond]
    flat: list[Cond] = []
    while terms:
        t = terms.pop(0)
        if t.op is Op.AND:
            terms[:0] = list(t.terms)
        elif t.op is Op.OR:
            raise PipelineDefinitionError(
                f"il.when({condition_of(gate).describe()}): KFP conditions are conjunctions of comparisons; "
                "`|` has no native form", pipeline=spec.name,
                hint="split the block into one il.when per alternative, or compute the flag in a step",
            )
        else:
            flat.append(t)
    return flat


def _condition(
    spec: PipelineSpec, gate: Gate, tasks: dict[str, Any], components: dict[str, NodeComponent],
    selectors: dict[str, str], opts: KfpOptions,
) -> Any:
    from .selector import as_bool, select_bool

    b = gate.condition
    src = components[b.node or ""]
    name = src.outputs[b.port or ""]
    channel = tasks[b.node or ""].outputs[name]
    if b.field:
        # KFP conditions read a whole output; a tiny component picks the dataclass field.
        whole = binding_type(spec, b.__class__.of_output(b.node or "", b.port or ""))
        if whole is not None and json_text(whole):
            from .selector import select_bool_text as select_bool
        pick = select_bool(value=channel, path=list(b.field))
    elif opts.local_conditions and (name != SINGLE or from_call(tasks, b.node)):
        # kfp.local resolves conditions only on outputs named "Output".
        pick = as_bool(value=channel)
    else:
        return channel
    pick.set_caching_options(enable_caching=False)
    pick.set_display_name(f"{gate.id}-condition")
    selectors[pick.name] = gate.id
    return pick.output


def compile_pipeline(spec: PipelineSpec, out: Path, opts: KfpOptions | None = None) -> Path:
    """Write the IR YAML (pipeline spec + platform spec) and return its path."""
    from kfp import compiler

    out = Path(out)
    path = out if out.suffix in (".yaml", ".yml", ".json") else out / f"{spec.name}.yaml"
    check_durable_state(spec, opts or KfpOptions())  # for a cluster: a retry runs in a fresh pod
    path.parent.mkdir(parents=True, exist_ok=True)
    built = build_pipeline(spec, opts)
    compiler.Compiler().compile(built.pipeline, str(path))
    return path
