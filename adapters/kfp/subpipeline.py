"""Sub-pipeline calls as KFP pipelines-as-components (a nested DAG in the IR).

A call of an ``@il.pipeline`` inside another (core/dsl/subpipeline.py) becomes a ``@dsl.pipeline``
of its own, built like the top level (its nodes, blocks, maps and nested calls), and called
inside the caller's body, which kfp compiles to a task whose component is a DAG
(``comp-<call>`` with a ``dag`` of the inner tasks). Its inputs are the sub-pipeline's
parameters as the caller bound them (plus anything else its body reads from outside); its
outputs are what the rest of the pipeline reads from it, named by the sub-pipeline's own
outputs where they match. KFP caches container executions, not DAG tasks: the inner steps
cache one by one.

An ``il.finally_`` in the sub-pipeline's body: a ``dsl.ExitHandler`` around the body inside
``comp-<call>``; when the call's outputs are read, the body is a nested pipeline of its own
(``comp-<call>-body``) followed by the finally task with ``.ignore_upstream_failure()`` (KFP's
other exit task), since KFP refuses a pipeline's outputs from inside an ExitHandler.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

from interlock.core.backend.plan import Call, Plan
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.graph import binding_type
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.subcalls import SEP, call, call_outputs

from .names import SINGLE, identifier
from .types import kfp_type

UNNAMED = "o0"  # core's name for a pipeline's single returned value

_PY = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}


class _Outputs:
    """Stands for a node outside the component whose outputs are channels: the component's
    inputs (inside), or the call task's outputs (in the caller). ``task``: what ``after=`` waits for."""

    def __init__(self, task: Any, name: str):
        self.task = task
        self.name = name
        self.outputs: dict[str, Any] = {}


class _Collected(_Outputs):
    """A body node of a mapped call as readers after its loop see it: a fresh ``dsl.Collected``
    of the call task's output at each read (kfp ties one to the task that reads it)."""

    def __init__(self, task: Any, name: str):
        super().__init__(task, name)
        self.channels: dict[str, Any] = {}

    @property
    def outputs(self) -> dict[str, Any]:
        from kfp import dsl

        return {k: dsl.Collected(v) for k, v in self.channels.items()}

    @outputs.setter
    def outputs(self, value: dict[str, Any]) -> None:
        self.channels = dict(value)


def _annotation(spec: PipelineSpec, b: Binding, *, output: bool, within: Any = None) -> Any:
    """``within``: the call whose output ``b`` is; read from a mapped call inside it, a list."""
    from kfp import dsl

    t = binding_type(spec, b)
    if within is not None and t is not None:
        from .submap import lifted_in

        t = lifted_in(spec, b, t, within)
    if t is None:
        raise PipelineDefinitionError(f"cannot type {b.describe()}", pipeline=spec.name)
    kt = kfp_type(t)
    if kt.is_artifact:
        cls = getattr(dsl, kt.artifact or "Artifact")
        return cls if output else dsl.Input[cls]
    return _PY[kt.parameter or "str"]


def kfp_call_outputs(spec: PipelineSpec, name: str) -> list[tuple[str, Binding]]:
    """The call's outputs as its KFP component names them: the sub-pipeline's own names
    (NamedTuple fields, ``o0``, ``o1``... of a tuple), and KFP's ``Output`` for one unnamed output;
    only those KFP lets out of the call (``_declared_outputs``)."""
    outs = _declared_outputs(spec, name)
    own = call(spec, name).outputs
    if len(outs) == 1 and outs[0][0] == UNNAMED and len(own) == 1:
        return [(SINGLE, outs[0][1])]
    return outs


def single(outs: list[tuple[str, Binding]]) -> bool:
    return len(outs) == 1 and outs[0][0] == SINGLE


def build_calls(plan: Plan, components: dict[str, Any], selectors: dict[str, str], opts: Any,
                task_names: dict[str, str]) -> dict[str, Any]:
    """Every call's pipeline component, innermost first: kfp refuses to define a pipeline while
    another is being built, so the components exist before the caller's body runs."""
    spec = plan.spec
    built: dict[str, Any] = {}
    for c in plan.calls_inside_out():
        name = c.call.name
        if c.finally_ is not None and kfp_call_outputs(spec, name):
            # The call's il.finally_ and outputs read outside it: the body as a nested pipeline of its
            # own, the finally step after it with ignore_upstream_failure (KFP's alternative to an exit
            # task), so that the outputs escape (KFP refuses them from inside a dsl.ExitHandler).
            body = _component(spec, c, components, selectors, opts, task_names, built, handler=False, suffix="-body")
            built[name] = _after_body(spec, c, body, opts, components, task_names)
        else:
            built[name] = _component(spec, c, components, selectors, opts, task_names, built)
    return built


def _after_body(spec: PipelineSpec, unit: Call, body_component: Any, opts: Any, components: dict[str, Any],
                task_names: dict[str, str]) -> Any:
    """The call's component: its body's nested pipeline, then the finally step's task, which runs
    when the body is done whatever its outcome (``.ignore_upstream_failure()``) and gets its
    ``dsl.PipelineTaskFinalStatus``; it returns the body's outputs."""
    from kfp import dsl

    from .finally_task import make_finally_task
    from .submap import call_inputs

    c, name = unit.call, unit.call.name
    ins = call_inputs(spec, c, unit.inputs)
    outs = kfp_call_outputs(spec, name)
    ret = typing.NamedTuple("Outputs", [(k, _annotation(spec, b, output=True, within=c)) for k, b in outs])  # type: ignore[misc]

    def wrapper(*args: Any) -> Any:
        values = dict(zip([k for k, _ in ins], args, strict=True))
        task = body_component(**values)
        task.set_display_name(f"{name}-body")
        inner_values = {b.param or "": values[k] for k, b in ins if b.kind is BindingKind.PARAM}
        exit_task, comp = make_finally_task(spec, inner_values, opts, _finally_node(spec, c.finally_ or ""))
        components[comp.node] = comp
        task_names[exit_task.name] = comp.node
        exit_task.after(task).ignore_upstream_failure()
        return ret(*(task.outputs[k] for k, _ in outs))

    params = [inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=_annotation(spec, b, output=False))
              for k, b in ins]
    wrapper.__signature__ = inspect.Signature(params, return_annotation=ret)  # type: ignore[attr-defined]
    wrapper.__name__ = name.replace("-", "_").replace(".", "_")
    wrapper.__doc__ = f"interlock sub-pipeline {c.pipeline!r}, called as {name!r}, and its il.finally_"
    try:
        return dsl.pipeline(name=name.replace(".", "-"), description=wrapper.__doc__)(wrapper)
    except PipelineDefinitionError:
        raise
    except Exception as exc:
        raise PipelineDefinitionError(f"kfp refused sub-pipeline {c.pipeline!r} (called as {name!r}): {exc}",
                                      pipeline=spec.name, step=name) from exc


def _component(
    spec: PipelineSpec, unit: Call, components: dict[str, Any], selectors: dict[str, str],
    opts: Any, task_names: dict[str, str], calls: dict[str, Any], handler: bool = True, suffix: str = "",
) -> Any:
    from kfp import dsl

    from .compile import _value, emit_units, one_of_memo
    from .finally_task import check_blocks
    from .submap import CALL_ITEM, CALL_ITEM_ARG, call_inputs, takes_item

    c, name = unit.call, unit.call.name
    ins = call_inputs(spec, c, unit.inputs)
    outs = kfp_call_outputs(spec, name)
    if single(outs):  # one unnamed output: returned plainly, KFP's "Output", as at the top level
        ret = _annotation(spec, outs[0][1], output=True, within=c)
    else:
        ret = typing.NamedTuple(
            "Outputs", [(k, _annotation(spec, b, output=True, within=c)) for k, b in outs]) if outs else None

    def body(*args: Any) -> Any:
        inner_values: dict[str, Any] = {}
        inner_tasks: dict[str, Any] = {}
        for (_, b), channel in zip(ins, args[:len(ins)], strict=True):
            if b.kind is BindingKind.PARAM:
                inner_values[b.param or ""] = channel
            elif b.kind is BindingKind.OUTPUT:
                holder = inner_tasks.setdefault(b.node or "", _Outputs(None, b.node or ""))
                holder.outputs[components[b.node or ""].outputs[b.port or ""]] = channel
            else:  # a branch value from outside
                inner_tasks[one_of_memo(b)] = channel
        if takes_item(spec, c):  # il.map over it (or one around it): the last input is the item (submap.py)
            inner_values[CALL_ITEM] = args[-1]
            for n in c.nodes:  # the body's wait for the list (after=) is the loop's
                for up in spec.node(n).after:
                    if up not in c.nodes:
                        inner_tasks.setdefault(up, _Outputs(None, up))
        exit_handler = None
        if c.finally_ is not None and handler:  # the call's il.finally_: an ExitHandler around its whole body
            from .finally_task import make_finally_task

            exit_task, comp = make_finally_task(spec, inner_values, opts, _finally_node(spec, c.finally_))
            components[comp.node] = comp
            task_names[exit_task.name] = comp.node
            exit_handler = dsl.ExitHandler(exit_task, name=f"{identifier(c.finally_)}-finally")
            exit_handler.__enter__()
        # `with il.finally_` blocks in the sub-pipeline's body: each an ExitHandler in its component
        check_blocks(spec, opts, call=c)
        emit_units(spec, unit.units, inner_values, inner_tasks, components, selectors, opts, task_names, calls)
        if exit_handler is not None:
            exit_handler.__exit__(None, None, None)
        if not outs:
            return None
        returned = [_value(b, inner_values, inner_tasks, components) for _, b in outs]
        return returned[0] if single(outs) else ret(*returned)

    params = [inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=_annotation(spec, b, output=False))
              for k, b in ins]
    if takes_item(spec, c):
        params.append(inspect.Parameter(CALL_ITEM_ARG, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=dict))
    body.__signature__ = inspect.Signature(params, return_annotation=ret or inspect.Signature.empty)  # type: ignore[attr-defined]
    body.__name__ = (name + suffix).replace("-", "_").replace(".", "_")
    body.__doc__ = f"interlock sub-pipeline {c.pipeline!r}, called as {name!r}" + (" (its body)" if suffix else "")
    try:
        return dsl.pipeline(name=name.replace(".", "-") + suffix, description=body.__doc__)(body)
    except PipelineDefinitionError:
        raise
    except Exception as exc:
        raise PipelineDefinitionError(f"kfp refused sub-pipeline {c.pipeline!r} (called as {name!r}): {exc}",
                                      pipeline=spec.name, step=name) from exc


def _finally_node(spec: PipelineSpec, name: str) -> Any:
    return next(f for f in spec.finally_nodes() if f.name == name)


def _declared_outputs(spec: PipelineSpec, name: str) -> list[tuple[str, Binding]]:
    """A call's outputs as its KFP component declares them. KFP refuses a pipeline's outputs
    produced inside a ``dsl.ExitHandler``, a nested pipeline's as well: an output made inside a
    ``with il.finally_`` block of the call (or of a call nested in it) that is only a pipeline
    output is not declared (kfp-local still returns it, as for the top level's); read by a step or
    a condition outside the call, it is refused, naming the call, the output and what to write."""
    from dataclasses import replace

    outs = call_outputs(spec, name)
    from interlock.core.model.finally_blocks import is_call_finally

    # A call's own il.finally_ with outputs runs after its body's nested pipeline (_after_body), so
    # only `with il.finally_` blocks inside it (their ExitHandlers) hold outputs in.
    inside = {m for b in spec.finally_blocks if b.node.name.startswith(name + SEP) and not is_call_finally(spec, b)
              for m in b.members}
    if not inside:
        return outs
    c = call(spec, name)
    read = {b for _, b in call_outputs(replace(spec, outputs=()), name)}
    keep = []
    for k, b in outs:
        if not (b.nodes() & inside):
            keep.append((k, b))
            continue
        if b in read:
            made = set(b.nodes())
            readers = [n.name for n in spec.nodes if n.name not in c.nodes
                       and any(set(x.nodes()) & made for _, x in n.inputs)]
            who = f"step {readers[0]!r}" if readers else "a condition outside the call"
            raise PipelineDefinitionError(
                f"sub-pipeline {c.pipeline!r} (called as {name!r}): its output {k!r} ({b.describe()}) is made inside "
                f"an il.finally_ block and {who} reads it outside the call: KFP refuses the outputs of a pipeline "
                "produced inside a dsl.ExitHandler, a nested pipeline's too",
                pipeline=spec.name, step=name, port=k,
                hint="on KFP, move the steps that read it into the sub-pipeline, or leave the step that makes it "
                "outside the `with il.finally_(...)` block, or make the finally the sub-pipeline's whole-body "
                "il.finally_(step) (its outputs then reach the caller); local and Flyte run it as written",
            )
    return keep


def emit_call(spec: PipelineSpec, unit: Call, component: Any, values: dict[str, Any], tasks: dict[str, Any],
              components: dict[str, Any], opts: Any = None, task_names: dict[str, str] | None = None) -> None:
    """Call a sub-pipeline's component in the current body; its outputs stand for the inner nodes'.
    A mapped call (il.map over it): the call task in a ``dsl.ParallelFor``, its outputs
    ``dsl.Collected`` (submap.py)."""
    from .compile import _value, one_of_memo
    from .submap import CALL_ITEM, CALL_ITEM_ARG, call_inputs

    c, name = unit.call, unit.call.name
    ins = call_inputs(spec, c, unit.inputs)
    kwargs = {k: _value(b, values, tasks, components) for k, b in ins}
    if CALL_ITEM in values:  # a call in a mapped call's body: the item goes on to its tasks
        kwargs[CALL_ITEM_ARG] = values[CALL_ITEM]
    loop = None
    if c.map is not None:
        from .component import DEFAULT_IMAGE
        from .fanout import ENUMERATED, carried_key
        from .submap import open_call_loop

        bound = dict(c.inputs)
        items = _value(bound[c.map.item], values, tasks, components)
        zipped = tuple(_value(bound[p], values, tasks, components) for p in c.map.zipped)
        carried: dict[str, tuple[Any, Any]] = {}
        if opts is not None and opts.local_conditions:  # kfp-local: task outputs into the loop through its item
            carried = {k: (kwargs[k], binding_type(spec, b)) for k, b in ins
                       if b.kind in (BindingKind.OUTPUT, BindingKind.ONE_OF)}
        loop, item, enum = open_call_loop(spec, c, items, zipped, (opts.image if opts else None) or DEFAULT_IMAGE,
                                          carried, values.get(CALL_ITEM))
        if task_names is not None:
            task_names[ENUMERATED + enum.name] = name  # kfp-local reads the list's length from it
        kwargs = {**kwargs, **{k: getattr(item, carried_key(i)) for i, k in enumerate(carried)}, CALL_ITEM_ARG: item}
    try:
        task = component(**kwargs)
    except PipelineDefinitionError:
        raise
    except Exception as exc:
        raise PipelineDefinitionError(f"kfp refused sub-pipeline {c.pipeline!r} (called as {name!r}): {exc}",
                                      pipeline=spec.name, step=name) from exc
    task.set_display_name(name)
    if loop is not None:
        loop.__exit__(None, None, None)
    for up in c.after:  # after=: the call task waits for them, as a KFP user writes .after()
        if up not in tasks:
            raise PipelineDefinitionError(
                f"sub-pipeline call {name!r} waits (after=) for {up!r}, outside the call it is nested in: a KFP "
                "nested pipeline orders only its own tasks", pipeline=spec.name, step=name,
                hint="put after= on the outer sub-pipeline call",
            )
        before = getattr(tasks[up], "task", tasks[up])
        if before is not None:
            task.after(before)
    for k, b in kfp_call_outputs(spec, name):
        channel = task.outputs[k]
        if b.kind is BindingKind.OUTPUT:
            holder = tasks.get(b.node or "")
            if not isinstance(holder, _Outputs):
                holder = tasks[b.node or ""] = (_Collected if loop is not None else _Outputs)(task, b.node or "")
            if isinstance(holder, _Collected):
                holder.channels[components[b.node or ""].outputs[b.port or ""]] = channel
            else:
                holder.outputs[components[b.node or ""].outputs[b.port or ""]] = channel
        elif loop is not None:
            from kfp import dsl

            tasks[one_of_memo(b)] = dsl.Collected(channel)
        else:
            tasks[one_of_memo(b)] = channel
    for n in c.nodes:  # after= on an inner node from outside waits for the whole call
        tasks.setdefault(n, _Outputs(task, n))
