"""The portable type model: what may cross a step boundary, and what may be wired to what.

A ``TypeSpec`` is plain data (it lives in the PipelineSpec and round-trips through JSON).
It is derived from a Python annotation once, at decoration time, so every backend sees the
same types and the same compatibility rules. Anything that would need pickle is refused.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import CODECS, TypeKind, codec, qualname

__all__ = ["TypeSpec", "assignable", "is_named_tuple", "type_of"]


@dataclass(frozen=True)
class TypeSpec:
    kind: TypeKind
    optional: bool = False
    args: tuple[TypeSpec, ...] = ()  # list: (elem,), dict: (key, value); empty = unparameterised
    name: str | None = None  # dataclass, pydantic model or Enum: "module:Qualname"
    fields: tuple[tuple[str, TypeSpec], ...] = ()  # dataclass fields, in order
    # Literal["a", "b"] or an Enum's values: the JSON values a str/int port accepts
    choices: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        try:
            kind = TypeKind(self.kind)  # a plain string too: TypeSpec("int")
        except ValueError:
            raise ValueError(f"unknown type kind {self.kind!r}") from None
        object.__setattr__(self, "kind", kind)

    # -- presentation -------------------------------------------------------------------
    def describe(self) -> str:
        base = codec(self).describe(self)
        return f"Optional[{base}]" if self.optional and self.kind is not TypeKind.NONE else base

    __str__ = describe

    @property
    def is_artifact(self) -> bool:
        return codec(self).artifact

    def field_type(self, name: str) -> TypeSpec | None:
        return dict(self.fields).get(name)

    def resolve_class(self) -> type:
        """Import the class this spec names, a dataclass, a pydantic model or an Enum (inside a
        container, from the step's image)."""
        if not self.name:
            raise TypeError(f"{self.describe()} names no class")
        from interlock.core.model.refs import import_ref

        cls: type = import_ref(self.name)
        return cls

    # -- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.optional:
            out["optional"] = True
        if self.args:
            out["args"] = [a.to_json() for a in self.args]
        if self.name:
            out["name"] = self.name
        if self.fields:
            out["fields"] = [[n, t.to_json()] for n, t in self.fields]
        if self.choices:
            out["choices"] = list(self.choices)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TypeSpec:
        return cls(
            kind=data["kind"],
            optional=data.get("optional", False),
            args=tuple(cls.from_json(a) for a in data.get("args", ())),
            name=data.get("name"),
            fields=tuple((n, cls.from_json(t)) for n, t in data.get("fields", ())),
            choices=tuple(data.get("choices", ())),
        )


def type_of(annotation: Any, *, where: str = "") -> TypeSpec:
    """Translate a Python annotation into a TypeSpec, or raise naming what is unsupported."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)

    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1 and len(args) == 2:
            inner = type_of(members[0], where=where)
            return dataclasses.replace(inner, optional=True)
        raise PipelineDefinitionError(
            f"unsupported type {annotation!r}{where}: only Optional[X] unions are portable",
            hint="use a dataclass or separate outputs instead of a Union",
        )
    if annotation is list or origin is list:
        elem = type_of(args[0], where=where) if args else None
        # A list of artifacts moves as files (its own kind); any other list is JSON.
        kind = TypeKind.ARTIFACTS if elem is not None and elem.is_artifact else TypeKind.LIST
        return TypeSpec(kind, args=(elem,) if elem is not None else ())
    if annotation is dict or origin is dict:
        if args and args[0] is not str:
            raise PipelineDefinitionError(f"unsupported type {annotation!r}{where}: dict keys must be str (JSON)")
        return TypeSpec(TypeKind.DICT, args=(TypeSpec(TypeKind.STR), type_of(args[1], where=where)) if args else ())
    if origin is typing.Literal:
        return _literal(annotation, args, where)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum(annotation, where)
    if _is_pydantic_model(annotation):
        hints = typing.get_type_hints(annotation)
        fields = tuple(
            (name, type_of(hints[name], where=f"{where} (field {annotation.__name__}.{name})"))
            for name in annotation.model_fields
        )
        return TypeSpec(TypeKind.DATACLASS, name=qualname(annotation), fields=fields)
    # Leaf kinds (int, il.Model, pandas.DataFrame...) say themselves which annotation means them.
    for kind, row in CODECS.items():
        if row.recognizes is not None and row.recognizes(annotation):
            return TypeSpec(kind)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        hints = typing.get_type_hints(annotation)
        fields = tuple(
            (f.name, type_of(hints[f.name], where=f"{where} (field {annotation.__name__}.{f.name})"))
            for f in dataclasses.fields(annotation)
        )
        return TypeSpec(TypeKind.DATACLASS, name=qualname(annotation), fields=fields)
    raise PipelineDefinitionError(
        f"unsupported type {annotation!r}{where}",
        hint=(
            "portable types are int, float, str, bool, JSON-able list/dict, dataclasses, "
            "pandas.DataFrame, il.Dataset, il.Model, il.Metrics and NamedTuple for several "
            "outputs; arbitrary objects would need pickle, which never crosses a step boundary"
        ),
    )


_SCALARS = {str: TypeKind.STR, int: TypeKind.INT, bool: TypeKind.BOOL}


def _scalar_kind(values: tuple[Any, ...], what: str, where: str) -> TypeKind:
    kinds = {_SCALARS.get(type(v)) for v in values}
    if len(kinds) != 1 or None in kinds:
        raise PipelineDefinitionError(
            f"unsupported type {what}{where}: its values must all be str, all int or all bool",
            hint="a Literal or Enum port carries its values as JSON: one scalar type for all of them",
        )
    kind = kinds.pop()
    assert kind is not None
    return kind


def _literal(annotation: Any, args: tuple[Any, ...], where: str) -> TypeSpec:
    return TypeSpec(_scalar_kind(args, repr(annotation), where), choices=tuple(args))


def _enum(cls: type[enum.Enum], where: str) -> TypeSpec:
    values = tuple(m.value for m in cls)
    return TypeSpec(_scalar_kind(values, f"{cls.__name__} (an Enum)", where), name=qualname(cls), choices=values)


def _is_pydantic_model(tp: Any) -> bool:
    # Duck-typed, so that core never imports pydantic: a BaseModel subclass has both.
    return isinstance(tp, type) and hasattr(tp, "model_fields") and hasattr(tp, "model_validate")


def is_named_tuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def assignable(src: TypeSpec, dst: TypeSpec) -> bool:
    """Can a value of type ``src`` be wired into a port of type ``dst``?

    Numeric widening int -> float is allowed (as in Python typing); an Optional source
    cannot feed a non-optional port; an unparameterised list/dict accepts any list/dict;
    a dataclass only itself (by name); a Literal or Enum port only values among its own.
    """
    if src.optional and not dst.optional:
        return False
    if src.kind is TypeKind.NONE:
        return dst.optional or dst.kind is TypeKind.NONE
    if src.kind is not dst.kind:
        return src.kind is TypeKind.INT and dst.kind is TypeKind.FLOAT and not dst.choices
    if src.kind is not TypeKind.DATACLASS and (src.choices or dst.choices):
        # A Literal or an Enum feeds a plain port of its kind (its values are str or int); a
        # Literal/Enum port takes only a source whose values are all among its own.
        if not dst.choices:
            return not dst.name
        return bool(src.choices) and set(src.choices) <= set(dst.choices) and (dst.name is None or src.name == dst.name)
    if src.name != dst.name:  # dataclasses; None for every other kind
        return False
    if not dst.args:
        return True
    if not src.args:
        return False
    return all(assignable(a, b) for a, b in zip(src.args, dst.args, strict=True))
