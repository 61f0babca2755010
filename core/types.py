"""The portable type model: what may cross a step boundary, and what may be wired to what.

A ``TypeSpec`` is plain data (it lives in the PipelineSpec and round-trips through JSON).
It is derived from a Python annotation once, at decoration time, so every backend sees the
same types and the same compatibility rules. Anything that would need pickle is refused.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

from .artifacts import Dataset, Metrics, Model
from .errors import PipelineDefinitionError

PRIMITIVES = ("int", "float", "str", "bool")
ARTIFACTS = ("dataframe", "dataset", "model", "metrics")
KINDS = (*PRIMITIVES, "none", "list", "dict", "dataclass", *ARTIFACTS)


@dataclass(frozen=True)
class TypeSpec:
    kind: str
    optional: bool = False
    args: tuple[TypeSpec, ...] = ()  # list: (elem,), dict: (key, value); empty = unparameterised
    name: str | None = None  # dataclass: "module:Qualname"
    fields: tuple[tuple[str, TypeSpec], ...] = ()  # dataclass fields, in order

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown type kind {self.kind!r}")

    # -- presentation -------------------------------------------------------------------
    def describe(self) -> str:
        if self.kind == "list":
            base = f"list[{self.args[0].describe()}]" if self.args else "list"
        elif self.kind == "dict":
            base = f"dict[{self.args[0].describe()}, {self.args[1].describe()}]" if self.args else "dict"
        elif self.kind == "dataclass":
            base = (self.name or "dataclass").rsplit(":", 1)[-1]
        else:
            base = {
                "dataframe": "pandas.DataFrame",
                "dataset": "il.Dataset",
                "model": "il.Model",
                "metrics": "il.Metrics",
                "none": "None",
            }.get(self.kind, self.kind)
        return f"Optional[{base}]" if self.optional and self.kind != "none" else base

    __str__ = describe

    @property
    def is_artifact(self) -> bool:
        return self.kind in ARTIFACTS

    def field_type(self, name: str) -> TypeSpec | None:
        return dict(self.fields).get(name)

    def resolve_class(self) -> type:
        """Import the dataclass this spec names (inside a container, from the step's image)."""
        if self.kind != "dataclass" or not self.name:
            raise TypeError(f"{self.describe()} is not a dataclass type")
        from .loader import import_ref

        cls: type = import_ref(self.name)
        return cls

    # -- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.optional:
            out["optional"] = True
        if self.args:
            out["args"] = [a.to_json() for a in self.args]
        if self.name:
            out["name"] = self.name
        if self.fields:
            out["fields"] = [[n, t.to_json()] for n, t in self.fields]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TypeSpec:
        return cls(
            kind=data["kind"],
            optional=data.get("optional", False),
            args=tuple(cls.from_json(a) for a in data.get("args", ())),
            name=data.get("name"),
            fields=tuple((n, cls.from_json(t)) for n, t in data.get("fields", ())),
        )


def _is_dataframe(tp: Any) -> bool:
    # Checked by name so that core never imports pandas.
    return isinstance(tp, type) and tp.__name__ == "DataFrame" and tp.__module__.startswith("pandas")


def _qualname(tp: type) -> str:
    return f"{tp.__module__}:{tp.__qualname__}"


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
    if annotation is None or annotation is type(None):
        return TypeSpec("none")
    if annotation is bool:
        return TypeSpec("bool")
    if annotation is int:
        return TypeSpec("int")
    if annotation is float:
        return TypeSpec("float")
    if annotation is str:
        return TypeSpec("str")
    if annotation is list or origin is list:
        return TypeSpec("list", args=(type_of(args[0], where=where),) if args else ())
    if annotation is dict or origin is dict:
        if args and args[0] is not str:
            raise PipelineDefinitionError(f"unsupported type {annotation!r}{where}: dict keys must be str (JSON)")
        return TypeSpec("dict", args=(TypeSpec("str"), type_of(args[1], where=where)) if args else ())
    if isinstance(annotation, type):
        if issubclass(annotation, Metrics):
            return TypeSpec("metrics")
        if issubclass(annotation, Model):
            return TypeSpec("model")
        if issubclass(annotation, Dataset):
            return TypeSpec("dataset")
        if _is_dataframe(annotation):
            return TypeSpec("dataframe")
        if dataclasses.is_dataclass(annotation):
            hints = typing.get_type_hints(annotation)
            fields = tuple(
                (f.name, type_of(hints[f.name], where=f"{where} (field {annotation.__name__}.{f.name})"))
                for f in dataclasses.fields(annotation)
            )
            return TypeSpec("dataclass", name=_qualname(annotation), fields=fields)
    raise PipelineDefinitionError(
        f"unsupported type {annotation!r}{where}",
        hint=(
            "portable types are int, float, str, bool, JSON-able list/dict, dataclasses, "
            "pandas.DataFrame, il.Dataset, il.Model, il.Metrics and NamedTuple for several "
            "outputs; arbitrary objects would need pickle, which never crosses a step boundary"
        ),
    )


def is_named_tuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def assignable(src: TypeSpec, dst: TypeSpec) -> bool:
    """Can a value of type ``src`` be wired into a port of type ``dst``?

    Numeric widening int -> float is allowed (as in Python typing); an Optional source
    cannot feed a non-optional port; an unparameterised list/dict accepts any list/dict.
    """
    if src.optional and not dst.optional:
        return False
    if src.kind == "none":
        return dst.optional or dst.kind == "none"
    if src.kind != dst.kind:
        return src.kind == "int" and dst.kind == "float"
    if src.kind in ("list", "dict"):
        if not dst.args:
            return True
        if not src.args:
            return False
        return all(assignable(a, b) for a, b in zip(src.args, dst.args, strict=True))
    if src.kind == "dataclass":
        return src.name == dst.name
    return True


def value_matches(value: Any, spec: TypeSpec) -> bool:
    """Does a constant (a default or a literal wired into a step) fit ``spec``?"""
    if value is None:
        return spec.optional or spec.kind == "none"
    k = spec.kind
    if k == "bool":
        return isinstance(value, bool)
    if k == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if k == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if k == "str":
        return isinstance(value, str)
    if k == "list":
        return isinstance(value, list | tuple) and (
            not spec.args or all(value_matches(v, spec.args[0]) for v in value)
        )
    if k == "dict":
        return isinstance(value, dict) and all(isinstance(key, str) for key in value) and (
            not spec.args or all(value_matches(v, spec.args[1]) for v in value.values())
        )
    if k == "dataclass":
        return dataclasses.is_dataclass(value) and _qualname(type(value)) == spec.name
    return False  # artifacts are never constants
