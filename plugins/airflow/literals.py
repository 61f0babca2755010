"""Python values <-> Flyte literals at the Airflow boundary.

Inputs are typed by the launch plan's own interface (``closure.expected_inputs``), so the
bridge needs no Python type hints and no fetch of the workflow. Outputs become plain
JSON-able values for XCom: scalars as themselves, collections and maps as lists and dicts,
files, directories and data frames as their URIs. Pickle never enters XCom.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from flytekit.core.context_manager import FlyteContext
from flytekit.core.type_engine import TypeEngine
from flytekit.models import literals as lm
from flytekit.models import types as tm
from google.protobuf.json_format import MessageToDict

from interlock.core.base.errors import PipelineDefinitionError, SerializationError

_SIMPLE_NAMES = {v: k for k, v in vars(tm.SimpleType).items() if k.isupper() and isinstance(v, int)}
_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}


def _coerce_text(value: str, simple: int | None, name: str) -> Any:
    """Airflow renders templates to strings; parse them back into the declared scalar type."""
    try:
        if simple == tm.SimpleType.INTEGER:
            return int(value)
        if simple == tm.SimpleType.FLOAT:
            return float(value)
        if simple == tm.SimpleType.BOOLEAN:
            low = value.strip().lower()
            if low in _TRUE or low in _FALSE:
                return low in _TRUE
            raise ValueError(value)
        if simple == tm.SimpleType.DATETIME:
            parsed = dt.datetime.fromisoformat(value)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        if simple == tm.SimpleType.STRUCT:
            return json.loads(value)
    except ValueError as exc:
        raise SerializationError(
            f"input {name!r}: cannot read {value!r} as {_SIMPLE_NAMES.get(simple or 0, str(simple))}"
        ) from exc
    return value


def to_literal_map(
    ctx: FlyteContext,
    values: Mapping[str, Any],
    expected: Mapping[str, tm.LiteralType],
    *,
    entity: str,
) -> lm.LiteralMap:
    """Convert ``values`` using the launch plan's declared input types; unknown names are rejected."""
    literals: dict[str, lm.Literal] = {}
    for name, value in values.items():
        if name not in expected:
            raise PipelineDefinitionError(
                f"launch plan {entity!r} has no input {name!r}; it declares {sorted(expected)}",
                port=name,
            )
        lt = expected[name]
        if isinstance(value, str) and lt.simple is not None and lt.simple != tm.SimpleType.STRING:
            value = _coerce_text(value, lt.simple, name)
        try:
            hint = TypeEngine.guess_python_type(lt)
            literals[name] = TypeEngine.to_literal(ctx, value, hint, lt)
        except Exception as exc:  # flytekit raises several unrelated types here
            raise SerializationError(
                f"input {name!r}: cannot convert {value!r} to {lt}: {exc}"
            ) from exc
    return lm.LiteralMap(literals=literals)


def _binary(value: lm.Binary) -> Any:
    if value.tag == "msgpack":
        import msgpack  # flytekit's own dependency; dataclasses and dicts travel as msgpack

        return msgpack.unpackb(value.value, strict_map_key=False)
    return {"binary_tag": value.tag, "bytes": len(value.value)}


def _scalar(s: lm.Scalar) -> Any:
    if s.primitive is not None:
        v = s.primitive.value
        if isinstance(v, dt.datetime):
            return v.isoformat()
        if isinstance(v, dt.timedelta):
            return v.total_seconds()
        return v
    if s.none_type is not None:
        return None
    if s.generic is not None:
        return MessageToDict(s.generic)
    if s.blob is not None:
        return s.blob.uri
    if s.structured_dataset is not None:
        return s.structured_dataset.uri
    if s.schema is not None:
        return s.schema.uri
    if s.union is not None:
        return to_python(s.union.value)
    if s.binary is not None:
        return _binary(s.binary)
    if s.error is not None:
        return {"error": s.error.message, "node": s.error.failed_node_id}
    raise SerializationError(f"unsupported Flyte scalar: {s}")


def to_python(literal: lm.Literal) -> Any:
    """A JSON-able value for one output literal."""
    if literal.scalar is not None:
        return _scalar(literal.scalar)
    if literal.collection is not None:
        return [to_python(x) for x in literal.collection.literals]
    if literal.map is not None:
        return {k: to_python(v) for k, v in literal.map.literals.items()}
    if literal.offloaded_metadata is not None:
        return {"offloaded_uri": literal.offloaded_metadata.uri}
    return None


def literal_map_to_python(literal_map: lm.LiteralMap) -> dict[str, Any]:
    return {name: to_python(lit) for name, lit in literal_map.literals.items()}
