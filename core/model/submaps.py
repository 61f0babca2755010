"""``il.map`` over a sub-pipeline, read from a spec: which calls are mapped, the item parameter
a body reads, and the types a mapped call's outputs have outside it.

A mapped call is a ``SubCall`` with a ``MapSpec`` (``SubCall.map``). Its body's nodes are in the
graph once, under their qualified names (``trial.fit``); they run once per item. Inside the
body, the mapped parameter is the item parameter ``<call>[].<param>`` (a ``PARAM`` binding no
caller can name: it is set per item); the body's nodes wait for the list through ``after``.
Outside it, each output of a body node is a list, one element per item, in item order (Optional
where the map tolerates failed items): the reader is outside the call, the writer inside. A run
keeps the items' outputs together (``items_key``) and resolves an outside reader's binding once
per item.

Per item, a body node runs under ``<node>[i]`` (``trial.fit[2]``; a mapped step inside the body
``trial.fan[2][0]``), so its cache key, retries, checkpoint key, fragment and FATAL marker are
the item's own; the items of each body node fold into that node's fragment as a mapped step's
do (``run/map_items.py``), and the call's items into ``RunResult.maps[<call>]``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from interlock.core.model.fanout import MapSpec, list_of
from interlock.core.model.spec import Binding, Port
from interlock.core.model.subcalls import SubCall

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec
    from interlock.core.model.types import TypeSpec

ITEM = "[]."  # between a mapped call's name and its item parameter: "trial[].lr"


def item_param(call: str, param: str) -> str:
    """The name the body of mapped call ``call`` reads its item parameter ``param`` under."""
    return f"{call}{ITEM}{param}"


def mapped_calls(spec: PipelineSpec) -> list[SubCall]:
    return [c for c in spec.subs if getattr(c, "map", None) is not None]


def maps_around(spec: PipelineSpec, node: str) -> list[SubCall]:
    """The mapped calls holding ``node``, outermost first."""
    return sorted((c for c in mapped_calls(spec) if node in c.nodes), key=lambda c: len(c.name))


def outermost(spec: PipelineSpec, node: str) -> SubCall | None:
    around = maps_around(spec, node)
    return around[0] if around else None


def item_port(spec: PipelineSpec, name: str) -> Port | None:
    """The item parameter ``<call>[].<param>`` as a port of the element's type, if ``name`` is one."""
    if ITEM not in name:
        return None
    call, _, param = name.rpartition(ITEM)
    c = next((s for s in mapped_calls(spec) if s.name == call), None)
    if c is None:
        return None
    return next((p for p in c.items if p.name == param), None)


def lifted(spec: PipelineSpec, b: Binding, t: TypeSpec | None, reader: str | None) -> TypeSpec | None:
    """The type of ``b`` as ``reader`` (a node; None: the pipeline's outputs) sees it: a list per
    mapped call around what ``b`` reads that is not around the reader too."""
    if t is None:
        return None
    inner = set(c.name for c in maps_around(spec, reader)) if reader is not None else set()
    src = b.nodes()
    for c in sorted(mapped_calls(spec), key=lambda c: -len(c.name)):  # innermost first
        if c.name not in inner and src & set(c.nodes):
            assert c.map is not None
            t = list_of(dataclasses.replace(t, optional=True) if c.map.tolerant else t)
    return t


ITEMS = "[]"  # a run's outputs under "<call>[]": a mapped call's, one dict of its body's outputs per item


def items_key(call: str) -> str:
    """Where a run's outputs keep a mapped call's items: ``outputs["trial[]"]``, a list with one
    ``{node: {port: value}}`` per item (None: a failed item); a reader outside the call resolves
    its binding in each item (core/run/bindings.py), so a branch value or a field of a body
    output is gathered element by element."""
    return call + ITEMS


def item_name(node: str, indices: tuple[int, ...]) -> str:
    """The name a body node runs under for one item of each mapped call around it (outermost first)."""
    return node + "".join(f"[{i}]" for i in indices)


def check_call_map(pipeline: str, call: str, params: list[Port], m: MapSpec) -> None:
    """The mapped parameters must be parameters of the sub-pipeline."""
    from interlock.core.base.errors import PipelineDefinitionError

    known = {p.name for p in params}
    for name in m.ports:
        if name not in known:
            raise PipelineDefinitionError(
                f"il.map item={name!r} is not a parameter of the sub-pipeline; its parameters are {sorted(known)}",
                pipeline=pipeline, step=call,
            )
    if len(set(m.ports)) != len(m.ports):
        raise PipelineDefinitionError(f"il.map maps parameter(s) twice: {list(m.ports)}", pipeline=pipeline, step=call)
