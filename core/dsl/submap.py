"""``il.map`` over a sub-pipeline while a pipeline body is recorded (the model is ``model/submaps``).

    @il.pipeline(name="trial")
    def trial(lr: float, data: str) -> float:
        model = fit(lr=lr, data=data)
        return score(model=model)

    @il.pipeline(name="sweep")
    def sweep(data: str = "s3://...", lrs: list[float] = [0.1, 0.01]):
        scores = il.map(trial, over=lrs, data=data)   # list[float], one per lr, in order
        pick(scores=scores)

The body is recorded once, as a sub-pipeline call is; its item parameter reads one element
(``trial[].lr``) and each output it returns is a list outside it (KFP: a ``ParallelFor`` around
the body's tasks, its outputs ``dsl.Collected``; Flyte: a map over the sub-workflow).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.fanout import MapSpec, list_of
from interlock.core.model.spec import Binding, Port
from interlock.core.model.submaps import check_call_map, item_param

if TYPE_CHECKING:
    from interlock.core.dsl.build import Builder, Promise
    from interlock.core.dsl.pipeline import Pipeline
    from interlock.core.model.types import TypeSpec


def map_pipeline(builder: Builder, sub: Pipeline, over: Any, item: str | None, concurrency: int | None,
                 tolerate: float, broadcast: dict[str, Any], fields: bool | Mapping[str, str] = False) -> Any:
    """``il.map(sub_pipeline, over=..., ...)``: which parameter takes the item, then the call."""
    from interlock.core.dsl.fanout import Zip
    from interlock.core.dsl.subpipeline import call_subpipeline

    call = sub._call_name or sub.name
    params = sub._params()
    if fields is not False:  # each item a record, its fields to the parameters of their names
        from interlock.core.dsl.map_fields import fields_map

        m = fields_map(builder.name, call, f"sub-pipeline {sub.name!r}", params, over, item, broadcast, fields,
                       concurrency, tolerate)
        check_call_map(builder.name, call, params, m)
        return call_subpipeline(sub, builder, {**broadcast, m.item: over}, sub._call_name, mapped=m)
    if isinstance(over, Zip):
        if item is not None:
            raise PipelineDefinitionError(
                f"il.map(item={item!r}) with over=il.zip(...): the zip names the parameters already",
                pipeline=builder.name, step=call, hint="drop item=",
            )
        ports = list(over.lists)
        lists = dict(over.lists)
    else:
        if item is None:
            free = [p.name for p in params if p.name not in broadcast and not p.has_default]
            if len(free) != 1:
                raise PipelineDefinitionError(
                    f"il.map cannot tell which parameter of sub-pipeline {sub.name!r} takes the item: "
                    f"unbound parameters are {free}",
                    pipeline=builder.name, step=call,
                    hint=f"name it: il.map({sub.fn.__name__}, over=..., item={(free or ['<parameter>'])[0]!r}, ...)",
                )
            item = free[0]
        ports, lists = [item], {item: over}
    both = [p for p in ports if p in broadcast]
    if both:
        raise PipelineDefinitionError(
            f"parameter {both[0]!r} is both the mapped item and a broadcast argument",
            pipeline=builder.name, step=call, port=both[0],
        )
    m = MapSpec(ports[0], concurrency, tolerate, tuple(ports[1:]))
    check_call_map(builder.name, call, params, m)
    return call_subpipeline(sub, builder, {**broadcast, **lists}, sub._call_name, mapped=m)


class MappedCall:
    """What a mapped call adds while its body is recorded: item parameters, the wait for the
    lists, and list-typed outputs."""

    def __init__(self, builder: Builder, name: str, where: str, m: MapSpec):
        self.builder, self.name, self.where, self.map = builder, name, where, m
        self.items: list[Port] = []
        self.waits: set[str] = set()  # the nodes making the lists: every body node waits for them
        self.blocks = len(builder.finally_blocks)

    def bind_item(self, p: Port, value: Any) -> tuple[Binding | None, Promise]:
        """Bind the list for parameter ``p``; the body's promise reads one element of it."""
        from interlock.core.dsl.build import Promise

        b = self.builder
        self.items.append(Port(p.name, p.type))
        promise = Promise(b, Binding.of_param(item_param(self.name, p.name)), p.type)
        if p.name not in self.map.ports:  # fields=: a field's parameter, read from the record bound to the item's
            return None, promise
        try:
            bound = b._bind(value, self.name, p.name, self.map.list_type(p.type))
        except PipelineDefinitionError as exc:
            from interlock.core.dsl.subpipeline import _bare

            raise PipelineDefinitionError(
                f"il.map over {self.where}: the list for parameter {p.name!r}: {_bare(exc)}",
                pipeline=b.name, step=self.name, port=p.name, hint=exc.hint,
            ) from exc
        self.waits |= bound.nodes()
        return bound, promise

    def close(self, first_node: int, has_finally: bool) -> None:
        """The body is recorded: its nodes wait for the lists; an il.finally_ inside is refused."""
        b = self.builder
        if has_finally or len(b.finally_blocks) > self.blocks:
            raise PipelineDefinitionError(
                f"il.map over {self.where}: an il.finally_ inside a mapped sub-pipeline is not supported",
                pipeline=b.name, step=self.name,
                hint="put the il.finally_ around the il.map call in the calling pipeline, or map a sub-pipeline "
                "without one",
            )
        if self.waits:
            for i in range(first_node, len(b.nodes)):
                n = b.nodes[i]
                b.nodes[i] = dataclasses.replace(n, after=tuple(sorted(set(n.after) | self.waits)))

    def lift(self, t: TypeSpec) -> TypeSpec:
        """An output of the body, as the caller sees it: one element per item."""
        return list_of(dataclasses.replace(t, optional=True) if self.map.tolerant else t)
