"""``il.map`` over a sub-pipeline on KFP: ``dsl.ParallelFor`` around the call's pipeline component.

The list goes through the call's ``<call>-enumerate-items`` task (fanout.py), as a step map's
does, and the loop calls the body's nested pipeline (subpipeline.py) once per enumerated item,
with ``parallelism`` the map's ``concurrency``. The pipeline component takes the item as one
more input (``interlock_call_item``) and hands it to every task of its body: the shim runs each
body step under its item name (``trial.fit[2]``, core/model/submaps.py) and reads the mapped
parameters from it. Readers outside the loop get ``dsl.Collected`` of the call task's outputs.
A map inside the body is a ``ParallelFor`` inside the call's component: an inner mapped call's
enumerated items carry the outer item (``"outer"``), so its tasks run as ``outer.inner.step[i][j]``
and read both items' values; ``fields=`` hands each task the record, its shim reads the fields.

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
    calls = maps_around(spec, node)
    if not calls:
        return None
    n = spec.node(node)
    out: dict[str, int | str] = {}
    offset = 0  # a call inside mapped calls: their items' values come first, outermost first (unpack)
    for c in calls:
        assert c.map is not None
        field_of = {param: f for f, param in c.map.fields}
        for port, b in n.inputs:
            if b.kind is BindingKind.PARAM and (b.param or "").startswith(c.name + ITEM):
                param = (b.param or "")[len(c.name + ITEM):]
                out[port] = field_of[param] if param in field_of else offset + list(c.map.ports).index(param)
        offset += len(c.map.ports)
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
        outer = [s.name for s in mapped_calls(spec) if s.name != c.name and set(c.nodes) <= set(s.nodes)]
        if outer and c.map.fields:
            raise PipelineDefinitionError(
                f"il.map(fields=...) over sub-pipeline {c.pipeline!r} (called as {c.name!r}) inside the mapped "
                f"sub-pipeline call {outer[0]!r} is not rendered on KFP",
                pipeline=spec.name, step=c.name,
                hint="take the whole record as the inner sub-pipeline's parameter, or run it with --backend local",
            )
        launched = [n for n in c.nodes if spec.step_of(n).distributed is not None]
        if launched:
            raise PipelineDefinitionError(
                f"distributed step {launched[0]!r} inside the mapped sub-pipeline call {c.name!r}: each item would "
                "launch a job of its own", pipeline=spec.name, step=launched[0],
                hint="map a plain step, or make the distributed step take the whole list outside the map",
            )


def open_call_loop(spec: PipelineSpec, c: SubCall, items: Any, zipped: tuple[Any, ...], image: str,
                   carried: dict[str, tuple[Any, Any]], outer: Any = None) -> tuple[Any, Any, Any]:
    """Enter ``ParallelFor`` over the call's enumerated list; (context manager, loop item, enumerate task).
    ``outer``: a call inside a mapped call's body: that call's item, which each enumerated item
    carries on (``"outer"``), so the body's tasks know every item they run under."""
    from kfp import dsl

    from .fanout import ENUMERATE, OUTER, _enumerate_component, carried_key, list_form, zip_key

    assert c.map is not None
    bound = dict(c.inputs)
    forms = tuple(list_form(spec, bound[p]) for p in c.map.ports)
    enum = _enumerate_component(c.name, image, {p: t for p, (_, t) in carried.items()}, len(zipped), forms,
                                tuple(f for f, _ in c.map.fields), outer is not None)(
        items=items, **{carried_key(k): v for k, (v, _) in enumerate(carried.values())},
        **{zip_key(k): v for k, v in enumerate(zipped)}, **({OUTER: outer} if outer is not None else {}))
    enum.set_display_name(f"{c.name}-{ENUMERATE}")
    enum.set_caching_options(enable_caching=False)
    loop = dsl.ParallelFor(enum.output, parallelism=c.map.concurrency or 0, name=f"{c.name}-map")
    return loop, loop.__enter__(), enum


def unpack(node: str, raw: Any) -> tuple[str, list[Any]]:
    """In a body task: the shim's name for this item of the node (``node[i][j]`` inside two mapped
    calls), and the items' values, the outermost call's first."""
    from .fanout import OUTER, unpack_item

    indices: list[int] = []
    values: list[Any] = []
    while raw is not None:
        name, item, zipped = unpack_item(node, raw)
        indices.insert(0, int(name[len(node) + 1:-1]))
        values[:0] = [item, *zipped]
        raw = raw.get(OUTER) if isinstance(raw, dict) else None
    return item_name(node, tuple(indices)), values


def call_reports(spec: PipelineSpec, state: Any, sizes: dict[str, int], seen: dict[str, Any]) -> dict[str, Any]:
    """kfp-local, after the run: each mapped call's items folded (core/run/call_items.py), its
    ``MapReport`` by the call's name; ``seen`` gets each body node's status from its items (kfp's
    own record of a body task holds its last iteration only)."""
    from interlock.core.record.outcomes import Seen
    from interlock.core.run.call_items import ends_of, fold_call

    out: dict[str, Any] = {}
    calls = sorted(mapped_calls(spec), key=lambda c: -len(maps_around(spec, c.nodes[0])) if c.nodes else 0)
    for c in calls:  # innermost first: a call inside a mapped call is folded per outer item first
        n = sizes.get(c.name)
        for node in c.nodes:
            seen.pop(node, None)
        if n is None:  # its list was never made: settle says why
            continue
        body = [spec.node(x) for x in c.nodes]
        depth = len(maps_around(spec, c.nodes[0])) - 1 if c.nodes else 0
        if depth:  # inside mapped calls: one fold per item of the outer call (one level of nesting)
            import dataclasses

            from interlock.core.run.map_items import item_fragments

            outer_n = sizes.get(maps_around(spec, c.nodes[0])[0].name, 0)
            for i in range(outer_n):  # each outer item's own list: its length is the items seen
                seen_items = [j for x in body for j in item_fragments(state, item_name(x.name, (i,)))]
                k = max(seen_items) + 1 if seen_items else 0
                fold_call(spec, state, c, body, (i,), ends_of(state, body, (i,), k))
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


def lifted_in(spec: PipelineSpec, b: Any, t: Any, call: SubCall) -> Any:
    """The type of ``b`` (read by an output of ``call``'s component) inside that component: a list
    per mapped call inside ``call`` around what ``b`` reads (its loop's ``dsl.Collected``)."""
    import dataclasses

    from interlock.core.model.fanout import list_of

    src, own = b.nodes(), set(call.nodes)
    for s in sorted(mapped_calls(spec), key=lambda s: -len(s.name)):  # innermost first
        if s.name != call.name and set(s.nodes) < own and src & set(s.nodes):
            assert s.map is not None
            t = list_of(dataclasses.replace(t, optional=True) if s.map.tolerant else t)
    return t
