"""How interlock's portable types appear in a KFP v2 component signature.

JSON values travel as KFP parameters (typed, so KFP's own wiring check still applies);
DataFrames, directories and metrics travel as KFP artifacts, so the KFP UI and ML Metadata
see ``system.Dataset`` / ``system.Model`` / ``system.Metrics``. This module only produces
annotation *source text*: it is pasted into a generated component function.
"""

from __future__ import annotations

from dataclasses import dataclass

from interlock.core.errors import PipelineDefinitionError
from interlock.core.types import TypeSpec

# interlock kind -> (KFP artifact class name, MLMD schema title)
ARTIFACT_CLASSES: dict[str, tuple[str, str]] = {
    "dataframe": ("Dataset", "system.Dataset"),
    "dataset": ("Dataset", "system.Dataset"),
    "model": ("Model", "system.Model"),
    "metrics": ("Metrics", "system.Metrics"),
}

_PARAMETER_TYPES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "list": "list",
    "dict": "dict",
    # A dataclass crosses as its JSON object: a KFP Struct parameter.
    "dataclass": "dict",
}


@dataclass(frozen=True)
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


def json_text(t: TypeSpec) -> bool:
    """Optional JSON values travel as JSON text in a KFP string: KFP has no null parameter
    (kfp.local cannot even pass a missing optional one), and "null" is a fine string."""
    return t.optional and not t.is_artifact


def kfp_type(t: TypeSpec, *, where: str = "") -> KfpType:
    """The KFP form of a TypeSpec; an Optional JSON value is a string of JSON text."""
    if json_text(t):
        return KfpType(None, "str")
    if t.kind in ARTIFACT_CLASSES:
        cls, title = ARTIFACT_CLASSES[t.kind]
        return KfpType(cls, None, title)
    if t.kind in _PARAMETER_TYPES:
        return KfpType(None, _PARAMETER_TYPES[t.kind])
    raise PipelineDefinitionError(f"type {t.describe()}{where} has no KFP form")


def coerce_json(value: object, t: TypeSpec) -> object:
    """Undo protobuf's Struct round trip: every JSON number comes back as a float.

    Walks the declared type and turns integral floats back into ints where an int is
    declared. Numbers inside unparameterised list/dict stay floats (nothing says otherwise).
    """
    if value is None:
        return None
    if t.kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    if t.kind == "list" and t.args and isinstance(value, list):
        return [coerce_json(v, t.args[0]) for v in value]
    if t.kind == "dict" and t.args and isinstance(value, dict):
        return {k: coerce_json(v, t.args[1]) for k, v in value.items()}
    if t.kind == "dataclass" and isinstance(value, dict):
        fields = dict(t.fields)
        return {k: coerce_json(v, fields[k]) if k in fields else v for k, v in value.items()}
    return value


def encode(value: object, t: TypeSpec) -> object:
    """A JSON value (already JSON-able) in the KFP form of ``t``."""
    import json

    return json.dumps(value, sort_keys=True) if json_text(t) else value


def decode(raw: object, t: TypeSpec) -> object:
    """The JSON value behind a KFP value declared as ``t``."""
    import json

    return json.loads(raw) if json_text(t) and isinstance(raw, str) else raw
