"""How each interlock kind crosses a KFP v2 component boundary: one row per kind.

JSON values travel as KFP parameters (typed, so KFP's own wiring check still applies);
DataFrames, directories and metrics travel as KFP artifacts, so the KFP UI and ML Metadata
see ``system.Dataset`` / ``system.Model`` / ``system.Metrics``. ``KFP_CODECS`` holds, per
kind, its KFP type (annotation *source text*, pasted into a generated component function)
and, for artifacts, how a value is written into an output artifact and read back from an
input one. Parameters share one rule for every kind: the value's JSON form (core's row), as
JSON text when Optional. Each direction is one pass: KFP form -> this row -> core's row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError, SerializationError
from interlock.core.model.artifacts import Metrics
from interlock.core.model.codecs import (
    TypeKind,
    from_jsonable,
    read_parquet,
    to_jsonable,
    write_parquet,
)
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.types import TypeSpec
from interlock.core.model.values import read_value, write_value
from interlock.core.run.bindings import follow

NULL_KEY = "interlock_null"  # an Optional artifact output that was None


@dataclass(frozen=True, slots=True)
class KfpType:
    """One port's KFP form: an artifact class or a parameter type, as source text."""

    artifact: str | None  # "Dataset" | "Model" | "Metrics" for artifacts
    parameter: str | None  # "int" | "float" | "str" | "bool" | "list" | "dict" for parameters
    schema_title: str | None = None

    @property
    def is_artifact(self) -> bool:
        return self.artifact is not None

    def input_annotation(self) -> str:
        return f"Input[{self.artifact}]" if self.artifact else str(self.parameter)

    def output_annotation(self) -> str:
        if not self.artifact:
            raise ValueError("parameter outputs are returned, not passed")
        return f"Output[{self.artifact}]"


@dataclass(frozen=True, slots=True)
class KfpCodec:
    """One kind on KFP. Artifact rows write and read; parameter rows only name the type."""

    kind: TypeKind
    form: KfpType | None  # None: the kind has no KFP form
    write: Callable[[Any, TypeSpec, Any], None] | None = None  # a value (never None) into an output artifact
    read: Callable[[Any, TypeSpec], Any] | None = None  # an input artifact as the value


def kfp_codec(t: TypeSpec) -> KfpCodec:
    return KFP_CODECS[t.kind]


# -- types -----------------------------------------------------------------------------------
def json_text(t: TypeSpec) -> bool:
    """Which JSON values travel as JSON text in a KFP string rather than a typed parameter.

    Optional ones: KFP has no null parameter (kfp.local cannot even pass a missing optional
    one, nor a list or dict holding a null), and "null" is a fine string. Any value holding
    a dict (typed or not) or an untyped list, at any depth, dataclass fields included: a KFP
    list/dict parameter is a protobuf Struct, which makes every number a double and sorts
    keys. And any container holding an Optional value (``list[int | None]``, a tolerant
    map's output). JSON text carries the exact value: ints, floats, bools, None, key order,
    so the next step gets exactly what the step returned, as on every other backend.
    """
    return not t.is_artifact and (t.optional or _needs_text(t))


def _needs_text(t: TypeSpec, inside: bool = False) -> bool:
    if t.kind is TypeKind.DICT or (t.kind is TypeKind.LIST and not t.args) or (inside and t.optional):
        return True
    return any(_needs_text(a, True) for a in t.args) or any(_needs_text(ft, True) for _, ft in t.fields)


def kfp_type(t: TypeSpec, *, where: str = "") -> KfpType:
    """The KFP form of a TypeSpec; a value that travels as JSON text is a string."""
    if json_text(t):
        return KfpType(None, "str")
    form = kfp_codec(t).form
    if form is None:
        raise PipelineDefinitionError(f"type {t.describe()}{where} has no KFP form")
    return form


# -- parameters: the JSON form, as JSON text where json_text says ---------------------------------
def encode(value: object, t: TypeSpec) -> object:
    """A JSON value (already JSON-able) in the KFP form of ``t``."""
    # Keys stay in the value's order: the next step gets the dict the step returned.
    return json.dumps(value) if json_text(t) else value


def decode(raw: object, t: TypeSpec) -> object:
    """The JSON value behind a KFP value declared as ``t``."""
    return json.loads(raw) if json_text(t) and isinstance(raw, str) else raw


def run_parameters(spec: PipelineSpec, params: dict[str, Any]) -> dict[str, Any]:
    """The pipeline's parameter values as a KFP run's arguments (kfp-local's, a recurring run's)."""
    out = {}
    for p in spec.params:
        if p.name not in params:
            continue
        value = params[p.name]
        # A dataclass parameter may arrive as the instance or as its JSON object already.
        value = value if isinstance(value, dict) else to_jsonable(value, p.type)
        if value is None and not json_text(p.type):
            continue
        out[p.name] = encode(value, p.type)
    return out


def to_parameter(value: Any, t: TypeSpec, where: str) -> Any:
    """A step's output value as the KFP output parameter of type ``t``."""
    if json_text(t):
        return encode(to_jsonable(value, t), t)  # JSON text, "null" included
    if value is None:
        raise SerializationError(
            f"{where}: returned None; KFP output parameters cannot be None",
            hint="return a value, or use a dataclass field / sentinel for 'missing' on KFP",
        )
    return to_jsonable(value, t)


def to_value(raw: Any, binding: Binding | None, t: TypeSpec, declared: TypeSpec | None = None) -> Any:
    """A KFP input value (declared to KFP as ``declared``) as an interlock value of type ``t``.

    A binding that picks a dataclass field gets the whole output (KFP cannot index into a
    Struct), so the field path is followed here, on the JSON form, before core's row for ``t``.
    """
    if raw is None:
        return None
    fields = binding.field if binding is not None and binding.kind is BindingKind.OUTPUT else ()
    if t.kind is TypeKind.ARTIFACTS and isinstance(raw, list):
        return read_artifact(raw, t)
    if hasattr(raw, "path") and hasattr(raw, "uri"):
        return follow(read_artifact(raw, (declared or t) if fields else t), fields)
    if _collected_text(t, declared) and isinstance(raw, list):  # dsl.Collected of JSON-text items
        raw = [json.loads(x) if isinstance(x, str) else x for x in raw]
        return from_jsonable(raw, t)
    return from_jsonable(follow(decode(raw, declared or t), fields), t)


def _collected_text(t: TypeSpec, declared: TypeSpec | None) -> bool:
    """A list whose items travel as JSON text, declared to KFP as a list of strings."""
    return (declared is not None and declared.kind is TypeKind.LIST and declared.args == (TypeSpec(TypeKind.STR),)
            and t.kind is TypeKind.LIST and bool(t.args) and json_text(t.args[0]))


# -- artifacts -------------------------------------------------------------------------------
def write_artifact(value: Any, t: TypeSpec, art: Any) -> None:
    """A step's output value into its KFP output artifact (anything with ``.path``/``.metadata``)."""
    path = Path(art.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    art.metadata["interlock_type"] = t.describe()
    if value is None:
        # KFP has no null artifact: mark it, and still write a file so kfp's cache sees one.
        art.metadata[NULL_KEY] = True
        path.write_text("null")
        return
    write = kfp_codec(t).write
    if write is None:
        raise SerializationError(f"{t.describe()} is not an artifact type")
    write(value, t, art)


def read_artifact(art: Any, t: TypeSpec) -> Any:
    """An input artifact (anything with ``.path``/``.metadata``) as an interlock value."""
    if t.optional and dict(art.metadata or {}).get(NULL_KEY):
        return None
    read = kfp_codec(t).read
    if read is None:
        raise SerializationError(f"{t.describe()} is not an artifact type")
    return read(art, t)


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


# DataFrame: a parquet file at .path (core's format), so plain KFP components can read it.
def _write_frame(value: Any, t: TypeSpec, art: Any) -> None:
    write_parquet(value, Path(art.path))
    art.metadata.update(rows=len(value), columns=[str(c) for c in value.columns])


def _read_frame(art: Any, t: TypeSpec) -> Any:
    path = Path(art.path)
    if path.is_dir():  # a port directory, as core writes it
        return read_value(t, path)
    try:
        return read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not parquet
        raise SerializationError(f"input artifact {art.uri} is not a parquet file: {exc}") from exc


# Dataset/Model: core's directory at .path; JSON-able metadata also on the artifact (KFP UI, MLMD).
def _write_directory(value: Any, t: TypeSpec, art: Any) -> None:
    write_value(value, t, Path(art.path))
    art.metadata.update({k: v for k, v in value.metadata.items() if _jsonable(v)})


def _read_directory(art: Any, t: TypeSpec) -> Any:
    return read_value(t, Path(art.path))


# Metrics: logged on the artifact (the KFP UI reads metadata) and written as a JSON file.
def _write_metrics(value: Any, t: TypeSpec, art: Any) -> None:
    values = to_jsonable(value, t)
    for name, number in values.items():
        art.log_metric(name, float(number))
    # The file must exist too, or kfp-local's cache treats the artifact as missing and never hits.
    Path(art.path).write_text(json.dumps(values, sort_keys=True))


def _read_metrics(art: Any, t: TypeSpec) -> Any:
    path = Path(art.path)
    if path.is_file():
        return Metrics(json.loads(path.read_text()))
    # A metrics artifact from a plain KFP component lives in its metadata only.
    return Metrics({k: v for k, v in dict(art.metadata or {}).items() if isinstance(v, int | float)})


def _read_artifacts(arts: Any, t: TypeSpec) -> Any:
    return [read_artifact(a, t.args[0]) for a in arts]


def _parameter(kind: TypeKind, name: str) -> KfpCodec:
    return KfpCodec(kind, KfpType(None, name))


def _artifact(kind: TypeKind, cls: str, write: Callable[[Any, TypeSpec, Any], None],
              read: Callable[[Any, TypeSpec], Any]) -> KfpCodec:
    return KfpCodec(kind, KfpType(cls, None, f"system.{cls}"), write, read)


KFP_CODECS: dict[TypeKind, KfpCodec] = {
    row.kind: row
    for row in (
        _parameter(TypeKind.INT, "int"),
        _parameter(TypeKind.FLOAT, "float"),
        _parameter(TypeKind.STR, "str"),
        _parameter(TypeKind.BOOL, "bool"),
        KfpCodec(TypeKind.NONE, None),
        _parameter(TypeKind.LIST, "list"),
        _parameter(TypeKind.DICT, "dict"),
        _parameter(TypeKind.DATACLASS, "dict"),  # its JSON object: a KFP Struct parameter
        _artifact(TypeKind.DATAFRAME, "Dataset", _write_frame, _read_frame),
        _artifact(TypeKind.DATASET, "Dataset", _write_directory, _read_directory),
        _artifact(TypeKind.MODEL, "Model", _write_directory, _read_directory),
        _artifact(TypeKind.METRICS, "Metrics", _write_metrics, _read_metrics),
        # Fan-in only: dsl.Collected artifacts arrive as a list (system.Artifact accepts every kind).
        KfpCodec(TypeKind.ARTIFACTS, KfpType("List[Artifact]", None), None, _read_artifacts),
    )
}

# kind -> (KFP artifact class name, MLMD schema title), for lineage.
ARTIFACT_CLASSES: dict[str, tuple[str, str]] = {
    kind: (row.form.artifact, row.form.schema_title)
    for kind, row in KFP_CODECS.items()
    if row.form is not None and row.form.artifact is not None and row.form.schema_title is not None
}
