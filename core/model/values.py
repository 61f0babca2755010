"""Moving values across step boundaries: JSON, parquet and directories. Never pickle.

Each port's value lives in its own directory, so every backend can move it as one blob
(a Flyte directory, a KFP artifact) and read it back the same way. What each kind writes
there, and how it hashes, is its row in ``codecs``; this module is the entry point that
handles None once for every kind. pandas and pyarrow are imported only when a DataFrame
actually crosses.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from interlock.core.base.errors import SerializationError
from interlock.core.model.codecs import VALUE_FILE, codec, from_jsonable, output_matches
from interlock.core.model.types import TypeSpec

__all__ = ["check_output", "read_value", "value_hash", "write_value"]


def check_output(value: Any, t: TypeSpec, where: str) -> None:
    """Refuse a returned value that does not match the declared type, naming the step and port."""
    if not output_matches(value, t):
        raise SerializationError(f"{where}: returned {type(value).__name__} {_short(value)}, declared {t.describe()}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- files -------------------------------------------------------------------------------
def write_value(value: Any, t: TypeSpec, dest: str | Path) -> None:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if value is None:
        (dest / VALUE_FILE).write_text("null")  # the null marker, whatever the kind
    else:
        codec(t).write(value, t, dest)


def moves_as_json(t: TypeSpec) -> bool:
    """Does a value of ``t`` move as ``value.json`` alone (its JSON text is all of it)?"""
    from interlock.core.model.codecs import _read_json, _write_json, file_fields
    from interlock.core.model.types import TypeKind

    c = codec(t)
    if t.kind is TypeKind.DATACLASS:  # unless it has file fields: those move as folders beside it
        return not file_fields(t)
    return c.write is _write_json and c.read is _read_json


def passed_value(value: Any, t: TypeSpec, dest: str | Path) -> Any:
    """What the next step reads once ``value`` is written to ``dest``: for a kind that moves as
    ``value.json`` alone, the same JSON text decoded in memory (no folder, file or read per
    value: il.map passes one per item); any other kind through ``dest``."""
    from interlock.core.model.codecs import json_text

    if value is None:
        return None
    if not moves_as_json(t):
        write_value(value, t, dest)
        return read_value(t, dest)
    return from_jsonable(json.loads(json_text(value, t)), t)


def read_value(t: TypeSpec, src: str | Path) -> Any:
    src = Path(src)
    marker = src / VALUE_FILE
    if codec(t).artifact and marker.exists() and json.loads(marker.read_text()) is None:
        return None  # JSON kinds read their null from value.json themselves
    return codec(t).read(t, src)


# -- hashing (cache keys) -----------------------------------------------------------------
def value_hash(value: Any, t: TypeSpec) -> str:
    if value is None:
        return hashlib.sha256(b"null").hexdigest()
    return codec(t).hash(value, t)
