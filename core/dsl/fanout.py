"""``il.map`` and fan-in lists while a pipeline body is recorded (the model is in ``fanout``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import TypeKind
from interlock.core.model.fanout import MapSpec, element_of
from interlock.core.model.spec import Binding
from interlock.core.model.types import TypeSpec

if TYPE_CHECKING:
    from interlock.core.dsl.build import Builder
    from interlock.core.dsl.pipeline import Pipeline
    from interlock.core.dsl.step import Step


class Zip:
    """``il.zip(a=xs, b=ys)``: lists mapped together, element ``i`` of each to its input."""

    def __init__(self, lists: dict[str, Any]):
        self.lists = lists

    def __repr__(self) -> str:
        return f"il.zip({', '.join(self.lists)})"


def zip(**lists: Any) -> Zip:  # noqa: A001 - il.zip reads as Python's zip, by input name
    """Lists to map together: ``il.map(step, over=il.zip(a=xs, b=ys))`` runs ``step(a=xs[i], b=ys[i])``
    for each ``i``, as Python's ``zip`` pairs them (KFP: a ParallelFor over the zipped list, each
    input from its field, ``item.a``; Flyte: an array node over both list inputs). The lists must
    have one length: a map over lists of different lengths fails."""
    if len(lists) < 2:
        raise PipelineDefinitionError(
            f"il.zip takes two lists or more, by input name; got {sorted(lists)}",
            hint="il.map(step, over=il.zip(a=xs, b=ys)); over one list: il.map(step, over=xs)",
        )
    return Zip(lists)


def map(  # noqa: A001 - il.map reads as the verb it is
    step: Step | Pipeline,
    over: Any,
    *,
    item: str | None = None,
    concurrency: int | None = None,
    tolerate: int | float = 0,
    fields: bool | Mapping[str, str] = False,
    **broadcast: Any,
) -> Any:
    """Run ``step`` (an ``@il.step``, or an ``@il.pipeline``: its whole body per item) once per
    element of ``over``; return a list of its output, one per item (a sub-pipeline: each output).

    ``over`` is a list: a pipeline parameter, a step output, or a list written here. Each
    element goes to the input named ``item`` (default: the one required input that
    ``broadcast`` leaves unbound). ``over=il.zip(a=xs, b=ys)`` maps several lists together,
    each to the input it is named for; ``broadcast`` inputs are the same for every item.
    ``concurrency`` bounds how many items run at once. ``tolerate`` lets up to that many
    items (an int: ``tolerate=2``) or that fraction of them (a float: ``tolerate=0.1``;
    ``1.0``: every item) fail: their elements are None (the output is ``list[Optional[T]]``)
    and the failed indices are reported. ``fields=True``: each item is a record (a dict, a
    dataclass, a pydantic model) and each of its fields goes to the input of its name (KFP's
    ``op(a=item.a, b=item.b)``); ``fields={"x": "a"}`` names the input of each field.
    """
    from interlock.core.dsl.build import current_builder
    from interlock.core.dsl.step import Step as StepClass

    builder = current_builder()
    if builder is None:
        raise PipelineDefinitionError("il.map is only meaningful inside an @il.pipeline function")
    if not isinstance(step, StepClass):
        from interlock.core.dsl.pipeline import Pipeline

        if isinstance(step, Pipeline):  # a loop body of several steps (KFP ParallelFor over a block)
            from interlock.core.dsl.submap import map_pipeline

            return map_pipeline(builder, step, over, item, concurrency, tolerate, broadcast, fields)
        raise PipelineDefinitionError(f"il.map takes an @il.step, got {step!r}", pipeline=builder.name)
    spec = step.spec
    node = step._node_name or spec.name
    if fields is not False:  # each item a record, its fields to the inputs of their names
        from interlock.core.dsl.map_fields import fields_map
        from interlock.core.model.fanout import check_map

        m = fields_map(builder.name, node, f"step {spec.name!r}", list(spec.inputs), over, item, broadcast, fields,
                       concurrency, tolerate)
        check_map(builder.name, node, spec, m, None)
        return builder.add_node(step, {**broadcast, m.item: over}, step._node_name, map_spec=m)
    if isinstance(over, Zip):
        return _map_zip(builder, step, over, item, concurrency, tolerate, broadcast)
    if item is None:
        free = [p.name for p in spec.inputs if p.name not in broadcast and not p.has_default]
        if len(free) != 1:
            raise PipelineDefinitionError(
                f"il.map cannot tell which input takes the item: unbound inputs are {free}",
                pipeline=builder.name, step=node,
                hint=f"name it: il.map({spec.name}, over=..., item={(free or ['<input>'])[0]!r}, ...)",
            )
        item = free[0]
    if item in broadcast:
        raise PipelineDefinitionError(
            f"input {item!r} is both the mapped item and a broadcast argument", pipeline=builder.name, step=node, port=item
        )
    m = MapSpec(item, concurrency, tolerate)
    from interlock.core.model.fanout import check_map

    check_map(builder.name, node, spec, m, None)
    return builder.add_node(step, {**broadcast, item: over}, step._node_name, map_spec=m)


def _map_zip(builder: Builder, step: Step, over: Zip, item: str | None, concurrency: int | None, tolerate: float,
             broadcast: dict[str, Any]) -> Any:
    spec = step.spec
    node = step._node_name or spec.name
    ports = list(over.lists)
    if item is not None:
        raise PipelineDefinitionError(
            f"il.map(item={item!r}) with over=il.zip(...): the zip names the inputs already",
            pipeline=builder.name, step=node, hint=f"drop item=; il.zip({', '.join(f'{p}=...' for p in ports)})",
        )
    both = [p for p in ports if p in broadcast]
    if both:
        raise PipelineDefinitionError(
            f"input {both[0]!r} is both zipped and a broadcast argument", pipeline=builder.name, step=node, port=both[0]
        )
    m = MapSpec(ports[0], concurrency, tolerate, tuple(ports[1:]))
    from interlock.core.model.fanout import check_map

    check_map(builder.name, node, spec, m, None)
    return builder.add_node(step, {**broadcast, **over.lists}, step._node_name, map_spec=m)


def bind_list(builder: Builder, value: list[Any] | tuple[Any, ...], node: str, port: str, dst: TypeSpec) -> Binding:
    """A list of step outputs (and constants) written in the pipeline body, for a list input."""
    elem = element_of(dst)
    assert elem is not None
    items = []
    for i, v in enumerate(value):
        try:
            items.append(builder._bind(v, node, port, elem))
        except PipelineDefinitionError as exc:
            raise PipelineDefinitionError(
                f"element [{i}] of the list: {exc.args[0] if exc.args else exc}", pipeline=builder.name,
                step=node, port=port,
            ) from exc
    if dst.kind is TypeKind.ARTIFACTS and any(b.kind == "const" for b in items):
        raise PipelineDefinitionError("a list of artifacts holds step outputs only", pipeline=builder.name,
                                      step=node, port=port)
    return Binding.of_list(items)
