"""How a value travels through Argo: the text of a parameter, or an artifact directory.

One rule, the same for workflow parameters, output parameters and ``withParam`` items: a
``str`` value is its own text (``argo submit -p snapshot=2026-11-01`` and ``{{item}}`` give it
so), every other value is JSON text. An artifact kind (a DataFrame, ``il.Model``...) is the
port's directory (core's ``write_value``), which Argo tars into the artifact repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interlock.core.base.errors import SerializationError
from interlock.core.model.codecs import TypeKind, from_jsonable, json_text
from interlock.core.model.types import TypeSpec
from interlock.core.model.values import read_value, value_hash, write_value

HASH_SUFFIX = "-hash"  # the output parameter that carries an artifact output's content hash


def raw_text(t: TypeSpec) -> bool:
    """Does a value of ``t`` travel as its own text (not JSON)?"""
    return t.kind is TypeKind.STR and not t.optional


def to_text(value: Any, t: TypeSpec) -> str:
    if raw_text(t):
        return str(value)
    return json_text(value, t)


def default_text(default: Any, t: TypeSpec) -> str:
    """A default (already in its JSON form) as a parameter's text."""
    return default if raw_text(t) and isinstance(default, str) else json.dumps(default)


def jsonable_from_text(text: str, t: TypeSpec) -> Any:
    """A parameter's text as the value's JSON form (before a field path is followed)."""
    if raw_text(t):
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SerializationError(f"{t.describe()} parameter is not JSON text: {text[:60]!r}") from exc


def from_text(text: str, t: TypeSpec) -> Any:
    return from_jsonable(jsonable_from_text(text, t), t)


def gathered(text: str, t: TypeSpec) -> Any:
    """A map's output as Argo aggregates it for a reader: a JSON list of each item's parameter
    text (``tasks.M.outputs.parameters.P``), read as the list the readers declared."""
    elem = t.args[0] if t.args else TypeSpec(TypeKind.STR)
    items = json.loads(text)
    if elem.is_artifact:  # a map's artifact outputs: each item's path on the run's volume
        return [read_value(elem, Path(x)) for x in items]
    return from_jsonable([jsonable_from_text(x, elem) if isinstance(x, str) else x for x in items], t)


def write_output(value: Any, t: TypeSpec, out: Path, port: str) -> None:
    """One output where the template's ``outputs`` expects it: ``out/<port>`` (a parameter's
    file, or an artifact's directory plus ``out/<port>-hash`` for cache keys downstream)."""
    out.mkdir(parents=True, exist_ok=True)
    if t.is_artifact:
        write_value(value, t, out / port)
        (out / f"{port}{HASH_SUFFIX}").write_text(value_hash(value, t))
    else:
        (out / port).write_text(to_text(value, t))


def read_artifact(t: TypeSpec, path: str) -> Any:
    return read_value(t, Path(path))
