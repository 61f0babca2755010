"""``il.map`` over a sub-pipeline on KFP: ``dsl.ParallelFor`` around the call's pipeline component.

The list goes through the call's ``<call>-enumerate-items`` task (fanout.py), as a step map's
does, and the loop calls the body's nested pipeline (subpipeline.py) once per enumerated item,
with ``parallelism`` the map's ``concurrency``. The pipeline component takes the item as one
more input (``interlock_call_item``) and hands it to every task of its body: the shim runs each
body step under its item name (``trial.fit[2]``, core/model/submaps.py) and reads the mapped
parameters from it. Readers outside the loop get ``dsl.Collected`` of the call task's outputs.

kfp.local 2.17 replaces every task-output input of a loop task with the loop item (fanout.py,
``carried_inputs``): under kfp-local a broadcast step output travels in the enumerated item and
the call task reads it as the item's field; the cluster IR keeps the plain broadcast.
"""

from __future__ import annotations

from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import BindingKind
from interlock.core.model.subcalls import SubCall
from interlock.core.model.submaps import ITEM, item_name, mapped_calls, maps_around

CALL_ITEM_ARG = "interlock_call_item"  # the body's input (and each body task's) holding the enumerated item
CALL_ITEM = "\0call-item"  # among a body's values: that input's channel


def around(spec: PipelineSpec, node: str) -> SubCall | None:
    """The mapped call holding ``node``, if any (check refuses more than one)."""
    found = maps_around(spec, node)
    return found[0] if found else None


def item_ports(spec: PipelineSpec, node: str) -> dict[str, int | str] | None:
    """For a node in a mapped call's body: each port fed by the call's item -> its place among the
    item's values (the item, then il.zip's other lists), or with ``fields=`` the name of the
    record's field it reads; None for a node outside every mapped call."""
    c = around(spec, node)
    if c is None or c.map is None:
        return None
    n = spec.node(node)
    field_of = {param: f for f, param in c.map.fields}
    out: dict[str, int | str] = {}
    for port, b in n.inputs:
        if b.kind is BindingKind.PARAM and (b.param or "").startswith(c.name + ITEM):
            param = (b.param or "")[len(c.name + ITEM):]
            out[port] = field_of[param] if param in field_of else list(c.map.ports).index(param)
    return out


def call_inputs(spec: PipelineSpec, c: SubCall, inputs: tuple[tuple[str, Any], ...]) -> list[tuple[str, Any]]:
    """A call's component inputs on KFP: the plan's (core/model/subcalls.py ``call_inputs``) less
    the item parameters of mapped calls (the item arrives as ``interlock_call_item``), plus the
    lists of the mapped calls inside it, which its body loops over."""
    from .names import identifier

    ins = [(k, b) for k, b in inputs if not (b.kind is BindingKind.PARAM and ITEM in (b.param or ""))]
    inside = set(c.nodes)
    for s in mapped_calls(spec):
        if s.name == c.name or not set(s.nodes) <= inside or s.map is None:
            continue
        bound = dict(s.inputs)
        for p in s.map.ports:
            b = bound[p]
            if b in [x for _, x in ins] or (b.kind is BindingKind.OUTPUT and b.node in inside):
                continue
            if b.kind in (BindingKind.PARAM, BindingKind.OUTPUT):
                ins.append((f"{identifier(s.name)}_{identifier(p)}_list", b))
    return ins


def takes_item(spec: PipelineSpec, c: SubCall) -> bool:
    """Does the call's component take a mapped call's item (it is one, or sits in one's body)?"""
    return c.map is not None or any(s.name != c.name and set(c.nodes) <= set(s.nodes) for s in mapped_calls(spec))


def check(spec: PipelineSpec) -> None:
    """What KFP cannot do yet with a mapped call: refused while the pipeline is built."""
    for c in mapped_calls(spec):
        assert c.map is not None
        hint_split = ("map each step of the body in turn, each over the list the previous map returned, or run "
                      "it with --backend local or flyte2-local")
        if c.map.tolerant:
            raise PipelineDefinitionError(
                f"il.map(tolerate={c.map.tolerate!r}) over sub-pipeline {c.pipeline!r} (called as {c.name!r}): "
                "a KFP loop iteration of a nested pipeline cannot report a failed item and still succeed",
                pipeline=spec.name, step=c.name,
                hint=f"drop tolerate= for KFP, or {hint_split} (a step map's tolerate= works on KFP)",
            )
        inner = [s.name for s in mapped_calls(spec) if s.name != c.name and set(s.nodes) <= set(c.nodes)]
        outer = [s.name for s in mapped_calls(spec) if s.name != c.name and set(c.nodes) <= set(s.nodes)]
        if inner or outer:
            what = inner[0] if inner else c.name
            raise PipelineDefinitionError(
                f"a mapped sub-pipeline inside the mapped sub-pipeline call {(outer[0] if outer else c.name)!r} "
                f"({what!r}): nested loops of sub-pipelines are not rendered on KFP yet (a step map inside is)",
                pipeline=spec.name, step=what,
                hint="make the inner map's body one @il.step (il.map over a step inside the body works on KFP), or "
                "run it with --backend local or flyte2-local",
            )
        launched = [n for n in c.nodes if spec.step_of(n).distributed is not None]
        if launched:
            raise PipelineDefinitionError(
                f"distributed step {launched[0]!r} inside the mapped sub-pipeline call {c.name!r}: each item would "
                "launch a job of its own", pipeline=spec.name, step=launched[0],
                hint="map a plain step, or make the distributed step take the whole list outside the map",
            )
        if c.finally_ is not None:
            raise PipelineDefinitionError(
                f"il.finally_ inside the mapped sub-pipeline {c.pipeline!r} (called as {c.name!r})",
                pipeline=spec.name, step=c.name, hint="put the il.finally_ around the il.map call",
            )


def open_call_loop(spec: PipelineSpec, c: SubCall, items: Any, zipped: tuple[Any, ...], image: str,
                   carried: dict[str, tuple[Any, Any]]) -> tuple[Any, Any, Any]:
    """Enter ``ParallelFor`` over the call's enumerated list; (context manager, loop item, enumerate task)."""
    from kfp import dsl

    from .fanout import ENUMERATE, _enumerate_component, carried_key, list_form, zip_key

    assert c.map is not None
    bound = dict(c.inputs)
    forms = tuple(list_form(spec, bound[p]) for p in c.map.ports)
    enum = _enumerate_component(c.name, image, {p: t for p, (_, t) in carried.items()}, len(zipped), forms,
                                tuple(f for f, _ in c.map.fields))(
        items=items, **{carried_key(k): v for k, (v, _) in enumerate(carried.values())},
        **{zip_key(k): v for k, v in enumerate(zipped)})
    enum.set_display_name(f"{c.name}-{ENUMERATE}")
    enum.set_caching_options(enable_caching=False)
    loop = dsl.ParallelFor(enum.output, parallelism=c.map.concurrency or 0, name=f"{c.name}-map")
    return loop, loop.__enter__(), enum


def unpack(node: str, raw: Any) -> tuple[str, list[Any]]:
    """In a body task: the shim's name for this item of the node, and the item's values."""
    from .fanout import unpack_item

    name, item, zipped = unpack_item(node, raw)
    return name, [item, *zipped]


def call_reports(spec: PipelineSpec, state: Any, sizes: dict[str, int], seen: dict[str, Any]) -> dict[str, Any]:
    """kfp-local, after the run: each mapped call's items folded (core/run/call_items.py), its
    ``MapReport`` by the call's name; ``seen`` gets each body node's status from its items (kfp's
    own record of a body task holds its last iteration only)."""
    from interlock.core.record.outcomes import Seen
    from interlock.core.run.call_items import ends_of, fold_call

    out: dict[str, Any] = {}
    for c in mapped_calls(spec):
        n = sizes.get(c.name)
        for node in c.nodes:
            seen.pop(node, None)
        if n is None:  # its list was never made: settle says why
            continue
        body = [spec.node(x) for x in c.nodes]
        for node in body:  # a step map inside the body: each call item's own items first, as local folds them
            if node.map is not None:
                import dataclasses

                from interlock.core.run.map_items import aggregate

                for i in range(n):  # the inner list's length per call item is not kept: its items seen
                    aggregate(spec, state, dataclasses.replace(node, name=item_name(node.name, (i,))))
        report, statuses = fold_call(spec, state, c, body, (), ends_of(state, body, (), n))
        out[c.name] = report
        seen.update({k: Seen(v) for k, v in statuses.items()})
    return out


def body_nodes(spec: PipelineSpec) -> frozenset[str]:
    """The nodes of every mapped call's body: kfp-local tells each once, after the run."""
    return frozenset(x for c in mapped_calls(spec) for x in c.nodes)
