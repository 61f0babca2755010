"""Portable types <-> flytekit types, and the value conversions at a Flyte task's edges.

Flyte moves every value itself (literals, blobs, structured datasets), so interlock only maps
types: primitives and typed list/dict stay native, dataclasses stay dataclasses, a DataFrame
is a StructuredDataset with a content hash, il.Dataset/il.Model are FlyteDirectory with a
content hash, il.Metrics is ``dict[str, float]``. The hashes make Flyte's cache key see the
data, not the random blob URI a run wrote it to, so the same data hits across runs.
"""

from __future__ import annotations

import json
import tempfile
import typing
from pathlib import Path
from typing import Annotated, Any, NamedTuple

from flytekit.core.hash import HashMethod
from flytekit.types.directory import FlyteDirectory

from interlock.core.artifacts import Dataset, Metrics, Model
from interlock.core.errors import PipelineDefinitionError
from interlock.core.spec import Port
from interlock.core.types import TypeSpec
from interlock.core.values import (
    ARTIFACT_META,
    dataframe_hash,
    directory_hash,
    from_jsonable,
    write_value,
)

# Marks an untyped list/dict carried as JSON text: flytekit would pickle a bare ``list``.
JSON_TEXT = "application/json"


def hash_frame(df: Any) -> str:
    return dataframe_hash(df)


def hash_directory(d: FlyteDirectory) -> str:
    return directory_hash(d.path)


def python_type(t: TypeSpec) -> Any:
    """The annotation flytekit derives the task interface from."""
    base = _base_type(t)
    return typing.Optional[base] if t.optional else base  # noqa: UP045 - a runtime type object


def _base_type(t: TypeSpec) -> Any:
    k = t.kind
    if k in ("int", "float", "str", "bool"):
        return {"int": int, "float": float, "str": str, "bool": bool}[k]
    if k == "list":
        return list[python_type(t.args[0])] if t.args else str  # type: ignore[misc]  # untyped: JSON text
    if k == "dict":
        return dict[str, python_type(t.args[1])] if t.args else str  # type: ignore[misc]
    if k == "dataclass":
        return t.resolve_class()
    if k == "dataframe":
        import pandas as pd

        return Annotated[pd.DataFrame, HashMethod(hash_frame)]
    if k in ("dataset", "model"):
        return Annotated[FlyteDirectory, HashMethod(hash_directory)]
    if k == "metrics":
        return dict[str, float]
    raise PipelineDefinitionError(f"type {t.describe()} has no Flyte equivalent")


def outputs_type(ports: tuple[Port, ...], name: str) -> Any:
    """A return annotation: None, one type (port "o0"), or a NamedTuple of the named ports."""
    if not ports:
        return None
    if len(ports) == 1 and ports[0].name == "o0":
        return python_type(ports[0].type)
    return NamedTuple(name, [(p.name, python_type(p.type)) for p in ports])


# -- values --------------------------------------------------------------------------------
def to_flyte(value: Any, t: TypeSpec, scratch: Path | None = None) -> Any:
    """An interlock value as the Python value flytekit expects for ``python_type(t)``."""
    if value is None:
        return None
    k = t.kind
    if k in ("list", "dict") and not t.args:
        return json.dumps(value, sort_keys=True)
    if k == "dataclass":
        return value if not isinstance(value, dict) else from_jsonable(value, t)
    if k == "metrics":
        return {str(n): float(v) for n, v in dict(value).items()}
    if k in ("dataset", "model"):
        # The directory plus interlock's metadata file, so a downstream step gets both back.
        dest = Path(tempfile.mkdtemp(prefix=f"interlock-{k}-", dir=scratch))
        write_value(value, t, dest)
        return FlyteDirectory(str(dest))
    if k == "list":
        return [to_flyte(v, t.args[0], scratch) for v in value]
    if k == "dict":
        return {n: to_flyte(v, t.args[1], scratch) for n, v in value.items()}
    return value


def from_flyte(value: Any, t: TypeSpec) -> Any:
    """What flytekit delivered, as the value the step function declared."""
    if value is None:
        return None
    k = t.kind
    if k in ("list", "dict") and not t.args:
        return json.loads(value) if isinstance(value, str) else value
    if k == "metrics":
        return Metrics(value)
    if k == "dataclass":
        return value if not isinstance(value, dict) else from_jsonable(value, t)
    if k in ("dataset", "model"):
        local = Path(value.download()) if isinstance(value, FlyteDirectory) else Path(value)
        meta_path = local / ARTIFACT_META
        meta = json.loads(meta_path.read_text())["metadata"] if meta_path.exists() else {}
        return (Model if k == "model" else Dataset)(local, meta)
    if k == "list":
        return [from_flyte(v, t.args[0]) for v in value]
    if k == "dict":
        return {n: from_flyte(v, t.args[1]) for n, v in value.items()}
    if k == "float":
        return float(value)
    return value


def outputs_to_flyte(ports: tuple[Port, ...], values: dict[str, Any], ret_type: Any, scratch: Path | None) -> Any:
    if not ports:
        return None
    converted = [to_flyte(values[p.name], p.type, scratch) for p in ports]
    if len(ports) == 1 and ports[0].name == "o0":
        return converted[0]
    return ret_type(*converted)
