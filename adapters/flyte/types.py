"""Portable types <-> flytekit types, and the value conversions at a Flyte task's edges.

Flyte moves every value itself (literals, blobs, structured datasets), so interlock only maps
types: primitives and typed list/dict stay native, dataclasses stay dataclasses, a DataFrame
is a StructuredDataset with a content hash, il.Dataset/il.Model are FlyteDirectory with a
content hash, il.Metrics is ``dict[str, float]``. The hashes make Flyte's cache key see the
data, not the random blob URI a run wrote it to, so the same data hits across runs.

``FLYTE_CODECS`` holds one row per kind (python type, to and from flytekit's value); where a
kind needs core's file format (a Dataset's directory), its row calls core's codec row.
"""

from __future__ import annotations

import json
import tempfile
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NamedTuple

from flytekit.core.hash import HashMethod
from flytekit.types.directory import FlyteDirectory

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.artifacts import Metrics
from interlock.core.model.codecs import TypeKind, codec, dataframe_hash, directory_hash, revive
from interlock.core.model.spec import Port
from interlock.core.model.types import TypeSpec
from interlock.core.model.values import write_value


def hash_frame(df: Any) -> str:
    return dataframe_hash(df)


def hash_directory(d: FlyteDirectory) -> str:
    return directory_hash(d.path)


@dataclass(frozen=True)
class FlyteCodec:
    """How one kind crosses a Flyte task boundary. Functions never see None."""

    kind: TypeKind
    # The annotation flytekit derives the task interface from; None: no Flyte form.
    python: Callable[[TypeSpec], Any] | None
    # An interlock value as the Python value flytekit expects for ``python(t)`` (``scratch``:
    # where to stage files flytekit will upload), and what flytekit delivers back as the value.
    to_flyte: Callable[[Any, TypeSpec, Path | None], Any] = lambda value, t, scratch: value
    from_flyte: Callable[[Any, TypeSpec], Any] = lambda value, t: value


def python_type(t: TypeSpec) -> Any:
    """The annotation flytekit derives the task interface from."""
    make = flyte_codec(t).python
    if make is None:
        raise PipelineDefinitionError(f"type {t.describe()} has no Flyte equivalent")
    base = make(t)
    return typing.Optional[base] if t.optional else base  # noqa: UP045 - a runtime type object


def to_flyte(value: Any, t: TypeSpec, scratch: Path | None = None) -> Any:
    """An interlock value as the Python value flytekit expects for ``python_type(t)``."""
    return None if value is None else flyte_codec(t).to_flyte(value, t, scratch)


def from_flyte(value: Any, t: TypeSpec) -> Any:
    """What flytekit delivered, as the value the step function declared."""
    return None if value is None else flyte_codec(t).from_flyte(value, t)


def flyte_codec(t: TypeSpec) -> FlyteCodec:
    return FLYTE_CODECS[t.kind]


def outputs_type(ports: tuple[Port, ...], name: str) -> Any:
    """A return annotation: None, one type (port "o0"), or a NamedTuple of the named ports."""
    if not ports:
        return None
    if len(ports) == 1 and ports[0].name == "o0":
        return python_type(ports[0].type)
    return NamedTuple(name, [(p.name, python_type(p.type)) for p in ports])


def outputs_to_flyte(ports: tuple[Port, ...], values: dict[str, Any], ret_type: Any, scratch: Path | None) -> Any:
    if not ports:
        return None
    converted = [to_flyte(values[p.name], p.type, scratch) for p in ports]
    if len(ports) == 1 and ports[0].name == "o0":
        return converted[0]
    return ret_type(*converted)


# -- rows ------------------------------------------------------------------------------------
def _native(kind: TypeKind, tp: type, **kw: Any) -> FlyteCodec:
    """A kind flytekit carries as a plain Python value of type ``tp``."""
    return FlyteCodec(kind, python=lambda t: tp, **kw)


# list/dict: typed ones stay native (element by element); untyped ones are JSON text, keys in
# the value's order (flytekit's own untyped dict goes through a Struct: doubles, sorted keys).
def _list_python(t: TypeSpec) -> Any:
    return list[python_type(t.args[0])] if t.args else str  # type: ignore[misc]


def _list_to(value: Any, t: TypeSpec, scratch: Path | None) -> Any:
    return [to_flyte(v, t.args[0], scratch) for v in value] if t.args else json.dumps(value)


def _list_from(value: Any, t: TypeSpec) -> Any:
    if not t.args:
        return json.loads(value) if isinstance(value, str) else value
    return [from_flyte(v, t.args[0]) for v in value]


def _dict_python(t: TypeSpec) -> Any:
    return dict[str, python_type(t.args[1])] if t.args else str  # type: ignore[misc]


def _dict_to(value: Any, t: TypeSpec, scratch: Path | None) -> Any:
    return {n: to_flyte(v, t.args[1], scratch) for n, v in value.items()} if t.args else json.dumps(value)


def _dict_from(value: Any, t: TypeSpec) -> Any:
    if not t.args:
        return json.loads(value) if isinstance(value, str) else value
    return {n: from_flyte(v, t.args[1]) for n, v in value.items()}


def _frame_python(t: TypeSpec) -> Any:
    import pandas as pd

    return Annotated[pd.DataFrame, HashMethod(hash_frame)]


# Dataset/Model: a FlyteDirectory holding the directory in core's format (files plus
# interlock's metadata file), so a downstream step gets both back.
def _directory_to(value: Any, t: TypeSpec, scratch: Path | None) -> Any:
    dest = Path(tempfile.mkdtemp(prefix=f"interlock-{t.kind.value}-", dir=scratch))
    write_value(value, t, dest)
    return FlyteDirectory(str(dest))


def _directory_from(value: Any, t: TypeSpec) -> Any:
    local = Path(value.download()) if isinstance(value, FlyteDirectory) else Path(value)
    return codec(t).read(t, local)


def _directory(kind: TypeKind) -> FlyteCodec:
    return FlyteCodec(
        kind, python=lambda t: Annotated[FlyteDirectory, HashMethod(hash_directory)],
        to_flyte=_directory_to, from_flyte=_directory_from,
    )


FLYTE_CODECS: dict[TypeKind, FlyteCodec] = {
    row.kind: row
    for row in (
        _native(TypeKind.INT, int),
        _native(TypeKind.FLOAT, float, from_flyte=lambda value, t: float(value)),
        _native(TypeKind.STR, str),
        _native(TypeKind.BOOL, bool),
        FlyteCodec(TypeKind.NONE, python=None),
        FlyteCodec(TypeKind.LIST, python=_list_python, to_flyte=_list_to, from_flyte=_list_from),
        FlyteCodec(TypeKind.ARTIFACTS, python=_list_python, to_flyte=_list_to, from_flyte=_list_from),
        FlyteCodec(TypeKind.DICT, python=_dict_python, to_flyte=_dict_to, from_flyte=_dict_from),
        # A dataclass stays a dataclass (flytekit's own transformer); its JSON object is revived.
        FlyteCodec(TypeKind.DATACLASS, python=lambda t: t.resolve_class(),
                   to_flyte=lambda value, t, scratch: revive(value, t), from_flyte=revive),
        # A StructuredDataset with a content hash: Flyte's cache key sees the data, not the blob URI.
        FlyteCodec(TypeKind.DATAFRAME, python=_frame_python),
        _directory(TypeKind.DATASET),
        _directory(TypeKind.MODEL),
        FlyteCodec(TypeKind.METRICS, python=lambda t: dict[str, float],
                   to_flyte=lambda value, t, scratch: {str(n): float(v) for n, v in dict(value).items()},
                   from_flyte=lambda value, t: Metrics(value)),
    )
}
