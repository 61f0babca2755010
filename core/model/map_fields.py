"""``il.map(..., fields=...)``: each item is a record (a dict, a dataclass, a pydantic model) and
its fields go to the inputs of their names, as KFP's ``with dsl.ParallelFor(records) as item:
op(a=item.a, b=item.b)`` does.

``fields=True`` binds every field of the record to the input (or sub-pipeline parameter) of the
same name; ``fields={"a": "p_a"}`` names which field goes to which input. Where the record's
type is known (a dataclass or pydantic model, a ``dict[str, V]``, or a literal list of dicts),
the field names and their types are checked while the pipeline is built, naming the step, the
input and the field; an untyped dict's missing field fails its item at run time.

In the spec, the map's ``item`` is the first field's input, bound to the whole list of records;
``MapSpec.fields`` says which field feeds which input and ``MapSpec.record`` is the records' type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import TypeKind
from interlock.core.model.spec import Port
from interlock.core.model.types import TypeSpec, assignable

UNTYPED = TypeSpec(TypeKind.DICT)  # a record whose fields are known only at run time


def record_type(over_type: TypeSpec | None) -> TypeSpec:
    """The records' type: the element of the list's type (an untyped dict when unknown)."""
    if over_type is not None and over_type.args:
        return over_type.args[0]
    return UNTYPED


def literal_keys(constant: Any) -> list[str] | None:
    """The fields of a list of dicts written in the body, when every dict has the same keys."""
    if isinstance(constant, list | tuple) and constant and all(isinstance(x, dict) for x in constant):
        keys = {tuple(x) for x in constant}
        return list(next(iter(keys))) if len(keys) == 1 else None
    return None


def _known_fields(record: TypeSpec) -> list[str] | None:
    return [f for f, _ in record.fields] if record.kind is TypeKind.DATACLASS else None


def _field_type(record: TypeSpec, f: str) -> TypeSpec | None:
    if record.kind is TypeKind.DATACLASS:
        return record.field_type(f)
    if record.kind is TypeKind.DICT and len(record.args) == 2:
        return record.args[1]
    return None  # a literal dict's value: checked when its item runs


def resolve_fields(pipeline: str, node: str, what: str, inputs: list[Port], broadcast: Mapping[str, Any],
                   record: TypeSpec, fields: bool | Mapping[str, str], keys: list[str] | None = None
                   ) -> tuple[tuple[str, str], ...]:
    """The (field, input) pairs of ``fields=``, checked against the inputs and the record's type.
    ``what``: how the error names the mapped thing ("step 'op'", "sub-pipeline 'trial'")."""
    by_name = {p.name: p for p in inputs}
    known = _known_fields(record) if keys is None else keys
    if fields is True:
        names = known if known is not None else [p.name for p in inputs if p.name not in broadcast
                                                  and not p.has_default]
        pairs = [(f, f) for f in names]
    elif isinstance(fields, Mapping) and fields:
        pairs = [(str(f), str(port)) for f, port in fields.items()]
    else:
        raise PipelineDefinitionError(
            f"il.map fields={fields!r}: True (each field to the input of its name) or a mapping of field to input",
            pipeline=pipeline, step=node, hint='fields=True, or fields={"a": "p_a", "b": "p_b"}',
        )
    for f, port in pairs:
        if port not in by_name:
            raise PipelineDefinitionError(
                f"il.map fields=: field {f!r} of the item has no input {port!r} in {what}; its inputs are "
                f"{sorted(by_name)}",
                pipeline=pipeline, step=node, port=port,
                hint='name which field feeds which input: fields={"' + f + '": "<input>"}, or leave the field out',
            )
        if port in broadcast:
            raise PipelineDefinitionError(
                f"input {port!r} is both an item field and a broadcast argument", pipeline=pipeline, step=node, port=port)
        if known is not None and f not in known:
            raise PipelineDefinitionError(
                f"il.map fields=: the item ({record.describe()}) has no field {f!r}; its fields are {known}",
                pipeline=pipeline, step=node, port=port,
            )
        t = _field_type(record, f)
        if t is not None and not assignable(t, by_name[port].type):
            raise PipelineDefinitionError(
                f"type mismatch: field {f!r} of the item is {t.describe()}, but the input expects "
                f"{by_name[port].type.describe()}",
                pipeline=pipeline, step=node, port=port,
            )
    bound = {port for _, port in pairs} | set(broadcast)
    missing = [p.name for p in inputs if p.name not in bound and not p.has_default]
    if missing:
        raise PipelineDefinitionError(
            f"il.map fields=: input {missing[0]!r} of {what} is neither an item field nor a broadcast argument",
            pipeline=pipeline, step=node, port=missing[0],
            hint=f"pass it ({missing[0]}=...), or map a field to it: fields={{'<field>': {missing[0]!r}}}",
        )
    if len({port for _, port in pairs}) != len(pairs):
        raise PipelineDefinitionError("il.map fields=: two fields feed one input", pipeline=pipeline, step=node)
    return tuple(pairs)


def field_of(record: Any, f: str, where: str) -> Any:
    """Field ``f`` of one item (a dict or an object); a missing one is a KeyError naming it."""
    if isinstance(record, Mapping):
        if f not in record:
            raise KeyError(f"{where}: the item has no field {f!r} (its fields are {sorted(record)})")
        return record[f]
    if not hasattr(record, f):
        raise KeyError(f"{where}: the item ({type(record).__name__}) has no field {f!r}")
    return getattr(record, f)
