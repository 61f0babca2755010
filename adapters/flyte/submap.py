"""``il.map`` over a sub-pipeline on Flyte 1: a ``@dynamic`` task that calls the body's sub-workflow
once per item and gathers each of its outputs into a list.

flytekit 1.16's array node maps a LaunchPlan, but every input of it must be a list (no bound
inputs), its local execution fails on a list from a task output, and the item's index is not
visible inside; a dynamic workflow has none of these limits and is what a Flyte user writes for
a loop over a sub-workflow. The dynamic task (``<pipeline>.<call>``) takes the call's broadcast
inputs and each mapped list; at run time it calls the call's sub-workflow (subworkflow.py) once
per item, with the item's parameters and its index (``interlock_call_index``), which the
sub-workflow hands to every body task: the shim runs each body step under its item name
(``trial.fit[2]``, core/model/submaps.py). On a cluster the dynamic's nodes run in parallel,
as many at once as propeller schedules (``concurrency`` has no Flyte form on a dynamic's
nodes: it is the map's, not enforced there); under flyte-local flytekit runs the items in order.

A step map inside the body is an array node (fanout.py) that binds the item's index as one more
input: its items run as ``grid-row.square[1][0]``. Under flyte-local every item runs before a failed one fails the call (as for a step map,
fanout.py), and the items' fragments fold into each body step's and into
``RunResult.maps[<call>]`` (core/run/call_items.py), as on every backend.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from interlock.core.backend.plan import Call
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import BindingKind
from interlock.core.model.submaps import ITEM, item_name, item_param, mapped_calls

if TYPE_CHECKING:
    from .workflow import Builder

CALL_INDEX_ARG = "interlock_call_index"  # each body task's (and the body sub-workflow's) input: the item's index
CALL_INDEX = "\0call-index"  # among a body's values: that input


def check(spec: PipelineSpec) -> None:
    """What Flyte 1 does not render of a mapped call: refused while the pipeline is built."""
    hint_split = ("map each step of the body in turn, each over the list the previous map returned, or run it "
                  "with --backend local, flyte2-local or kfp-local")
    for c in mapped_calls(spec):
        assert c.map is not None
        if c.map.tolerant:
            raise PipelineDefinitionError(
                f"il.map(tolerate={c.map.tolerate!r}) over sub-pipeline {c.pipeline!r} (called as {c.name!r}): "
                "a Flyte dynamic workflow fails when one of its sub-workflow nodes fails",
                pipeline=spec.name, step=c.name,
                hint=f"drop tolerate= for Flyte, or {hint_split} (a step map's fractional tolerate= works on Flyte)",
            )
        inner = [s.name for s in mapped_calls(spec) if s.name != c.name and set(s.nodes) <= set(c.nodes)]
        if inner:
            raise PipelineDefinitionError(
                f"a mapped sub-pipeline call inside the mapped sub-pipeline call {c.name!r} ({inner[0]!r}): "
                "nested loops of sub-pipelines are not rendered on Flyte 1 yet", pipeline=spec.name, step=inner[0],
                hint="make the inner map's body one @il.step that takes the whole row (a step map inside a mapped "
                "body works), or run it with --backend local or flyte2-local",
            )
        launched = [n for n in c.nodes if spec.step_of(n).distributed is not None]
        if launched:
            raise PipelineDefinitionError(
                f"distributed step {launched[0]!r} inside the mapped sub-pipeline call {c.name!r}: each item would "
                "launch a job of its own", pipeline=spec.name, step=launched[0],
                hint="map a plain step, or make the distributed step take the whole list outside the map",
            )


def call_inputs(spec: PipelineSpec, unit: Call) -> tuple[tuple[str, Any], ...]:
    """A call's sub-workflow inputs: the plan's, plus the lists the mapped calls inside it map over
    where they come from outside it (no node of the call reads them: the body reads the item)."""
    from .tasks import py_ident

    inside = set(unit.call.nodes)
    within = {s.name for s in mapped_calls(spec) if s.name != unit.call.name and set(s.nodes) <= inside}
    # the item parameter of a mapped call inside: its dynamic hands it to the body per item
    ins = [(k, b) for k, b in unit.inputs
           if not (b.kind is BindingKind.PARAM and (b.param or "").rpartition(ITEM)[0] in within)]
    for s in mapped_calls(spec):
        if s.name == unit.call.name or not set(s.nodes) <= inside or s.map is None:
            continue
        bound = dict(s.inputs)
        for p in s.map.ports:
            b = bound[p]
            if b in [x for _, x in ins] or (b.kind is BindingKind.OUTPUT and b.node in inside):
                continue
            if b.kind in (BindingKind.PARAM, BindingKind.OUTPUT):
                ins.append((py_ident(f"{s.name}_{p}__list"), b))
    return tuple(ins)


def list_key(port: str) -> str:
    """The dynamic task's input holding the list mapped onto the body's parameter ``port``."""
    from .tasks import py_ident

    return f"{py_ident(port)}__items"


def item_key(call: str, port: str) -> str:
    """The body sub-workflow's input holding one item's value of the call's parameter ``port``."""
    from .tasks import py_ident

    return py_ident(item_param(call, port))


def item_inputs(spec: PipelineSpec, unit: Call) -> dict[str, Any]:
    """The body sub-workflow's inputs beyond the call's own: the item's parameters and its index
    (name -> Python type)."""
    from .types import python_type

    c = unit.call
    if c.map is None:
        return {}
    return {**{item_key(c.name, p.name): python_type(p.type) for p in c.items}, CALL_INDEX_ARG: int}


def build_dynamic(b: Builder, unit: Call) -> Any:
    """The dynamic task of a mapped call (built outside any workflow compilation)."""
    from flytekit.core.python_function_task import PythonFunctionTask

    from interlock.core.model.submaps import lifted

    from .resolver import resolver
    from .tasks import blank_task, py_ident, task_name
    from .types import outputs_type, python_type
    from .workflow import OutputPort, type_of_binding, workflow_function

    spec, c = b.spec, unit.call
    m = c.map
    assert m is not None
    ports = {p.name: p for p in c.items}
    types = {k: python_type(type_of_binding(spec, x)) for k, x in unit.inputs}
    types |= {list_key(p): python_type(m.list_type(ports[p].type)) for p in m.ports}
    outs = unit.outputs
    ret = outputs_type(tuple(OutputPort(k, lifted(spec, x, type_of_binding(spec, x), None)) for k, x in outs),
                       py_ident(f"{spec.name}_{c.name}_items"))

    def body(**kwargs: Any) -> Any:
        return run_items(b, unit, ret, kwargs)

    fn = workflow_function(py_ident(f"{spec.name}_{c.name}_items"), types, {}, ret, body)
    task = blank_task(PythonFunctionTask, task_name(spec, c.name), c.name, c.name, spec.ref)
    kwargs = {"container_image": b.options.image} if b.options.image else {}
    PythonFunctionTask.__init__(task, task_config=None, task_function=fn, task_resolver=resolver,
                                execution_mode=PythonFunctionTask.ExecutionBehavior.DYNAMIC, **kwargs)
    return task


def run_items(b: Builder, unit: Call, ret: Any, kwargs: dict[str, Any]) -> Any:
    """The dynamic's body: the sub-workflow per item (promises in a pod, values under flyte-local),
    each output gathered into a list in item order."""
    from interlock.core.base.errors import StepStopped

    from .subworkflow import _name_workflow_node
    from .tasks import _local_run, _step_failed
    from .workflow import _local_execution

    c = unit.call
    m = c.map
    assert m is not None
    sub = b.subworkflow(unit.key)
    broadcast = {k: kwargs[k] for k, _ in unit.inputs}
    lists = {p: list(kwargs[list_key(p)]) for p in m.ports}
    lengths = {p: len(v) for p, v in lists.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"il.zip over lists of different lengths {lengths}")
    n = lengths[m.item]
    local = _local_run() if _local_execution() else None
    if local is not None:
        local.sizes[c.name] = n
        local.step_started(c.name)  # told live as the call's, not as a cache hit
    results: list[Any] = []
    failed: list[Exception] = []
    for i in range(n):
        item = {item_key(c.name, p): v for p, v in m.item_values(lists, i, f"item {i}").items()}
        try:
            results.append(sub(**broadcast, **item, **{CALL_INDEX_ARG: i}))
            _name_workflow_node(f"{c.name}-{i}")
        except Exception as exc:  # noqa: BLE001 - under flyte-local every item runs, then the first failure
            if local is None or isinstance(_step_failed(exc), StepStopped):
                raise  # told to stop: no further item starts
            failed.append(exc)
    if failed:
        raise failed[0]
    outs = unit.outputs
    if not outs:
        return None
    gathered = [[r if len(outs) == 1 and outs[0][0] == "o0" else getattr(r, k) for r in results] for k, _ in outs]
    return gathered[0] if len(outs) == 1 and outs[0][0] == "o0" else ret(*gathered)


def emit_map(b: Builder, unit: Call, values: dict[str, Any], handles: dict[str, Any]) -> None:
    """Call the mapped call's dynamic task and publish its lists to the caller's scope; ``after=``
    to and from the call orders its node (Flyte ``>>``), as for a plain call (subworkflow.py)."""
    from flytekit.core.promise import Promise

    from .subworkflow import _handle
    from .workflow import binding_key

    c = unit.call
    assert c.map is not None
    outputs = values.setdefault("__outputs__", {})
    bound = dict(c.inputs)
    kwargs = {k: b.value_of(x, values, outputs) for k, x in unit.inputs}
    kwargs |= {list_key(p): b.value_of(bound[p], values, outputs) for p in c.map.ports}
    result = b.tasks[c.name](**kwargs)
    if hasattr(result, "with_overrides") and not (isinstance(result, Promise) and result.is_ready):
        result.with_overrides(node_name=c.name)
    node = _handle(result)
    for up in c.after:
        if node is not None and _handle(handles.get(up)) is not None:
            _handle(handles[up]) >> node
    for n in c.nodes:
        handles.setdefault(n, result)
    outs = unit.outputs
    for k, x in outs:
        v = result if len(outs) == 1 and outs[0][0] == "o0" else getattr(result, k)
        if x.kind is BindingKind.OUTPUT:
            outputs.setdefault(x.node or "", {})[x.port or ""] = v
        else:
            values[binding_key(x)] = v


def call_reports(spec: PipelineSpec, state: Any, sizes: dict[str, int], seen: dict[str, Any]) -> dict[str, Any]:
    """flyte-local, after the run: each mapped call's items folded (core/run/call_items.py), its
    ``MapReport`` by the call's name; ``seen`` gets each body node's status from its items (a body
    node whose items flytekit's cache served wrote no item fragment: it keeps what flytekit showed,
    cached)."""
    from interlock.core.record.outcomes import Seen
    from interlock.core.run.call_items import ends_of, fold_call
    from interlock.core.run.map_items import aggregate

    out: dict[str, Any] = {}
    for c in mapped_calls(spec):
        n = sizes.get(c.name)
        if n is None:  # the dynamic never ran: settle says why
            continue
        body = [spec.node(x) for x in c.nodes]
        for node in body:  # a step map inside the body: its items, item by item of the call
            if node.map is not None:
                for i in range(n):
                    level = item_name(node.name, (i,))
                    aggregate(spec, state, dataclasses.replace(node, name=level), sizes.get(level))
        report, statuses = fold_call(spec, state, c, body, (), ends_of(state, body, (), n))
        out[c.name] = report
        seen.update({k: Seen(v) for k, v in statuses.items()})
    return out
