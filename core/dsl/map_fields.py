"""``il.map(..., fields=...)`` while a pipeline body is recorded: each item a record whose fields
go to the inputs of their names (the model is ``model/map_fields``).

    @il.step
    def op(a: int, b: float) -> float: ...

    il.map(op, over=[{"a": 1, "b": 2.0}, {"a": 3, "b": 4.0}], fields=True)   # op(a=1, b=2.0), op(a=3, b=4.0)
    il.map(op, over=pairs, fields={"x": "a", "y": "b"})                      # field x to input a, y to b
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.fanout import MapSpec
from interlock.core.model.map_fields import literal_keys, record_type, resolve_fields
from interlock.core.model.spec import Port


def fields_map(pipeline: str, node: str, what: str, inputs: list[Port], over: Any, item: str | None,
               broadcast: Mapping[str, Any], fields: bool | Mapping[str, str], concurrency: int | None,
               tolerate: float) -> MapSpec:
    """The MapSpec of a map over records: its item port the first field's input, its pairs checked."""
    from interlock.core.dsl.build import Promise
    from interlock.core.dsl.fanout import Zip

    if isinstance(over, Zip) or item is not None:
        raise PipelineDefinitionError(
            f"il.map(fields=...) with {'over=il.zip(...)' if isinstance(over, Zip) else f'item={item!r}'}: the "
            "fields of each item name the inputs already",
            pipeline=pipeline, step=node, hint="il.map(step, over=records, fields=True), without item= or il.zip",
        )
    over_type = over.type if isinstance(over, Promise) else None
    record = record_type(over_type)
    pairs = resolve_fields(pipeline, node, what, inputs, broadcast, record, fields,
                           keys=None if isinstance(over, Promise) else literal_keys(over))
    return MapSpec(pairs[0][1], concurrency, tolerate, (), pairs, record)
