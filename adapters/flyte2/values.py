"""Values between Flyte 2 tasks: each port's value as a small JSON reference.

A value that moves as JSON travels inline; any other (a DataFrame, a directory artifact) is
written once, by interlock's content hash, under the value store (a path every task can read:
the run's work directory locally, a mounted volume on a cluster). So the reference Flyte sees,
hashes and caches on is interlock's content hash, the same on every backend.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from interlock.core.model.codecs import from_jsonable, json_text
from interlock.core.model.types import TypeSpec
from interlock.core.model.values import moves_as_json, read_value, value_hash, write_value


def put(store: Path, value: Any, t: TypeSpec) -> str:
    """The reference of ``value``: its JSON inline, or its content hash (written once)."""
    if value is None:
        return "null"
    if moves_as_json(t):
        return json.dumps({"json": json_text(value, t)})
    digest = value_hash(value, t)
    dest = _path(store, digest)
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}.", dir=dest.parent))
        try:
            write_value(value, t, tmp / "v")
            os.replace(tmp / "v", dest)  # whole or not at all; a concurrent writer wrote the same bytes
        except OSError:
            if not dest.exists():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return json.dumps({"hash": digest})


def get(store: Path, ref: str, t: TypeSpec) -> Any:
    """The value a reference stands for."""
    data = json.loads(ref)
    if data is None:
        return None
    if "json" in data:
        return from_jsonable(json.loads(data["json"]), t)
    return read_value(t, _path(store, data["hash"]))


def _path(store: Path, digest: str) -> Path:
    return Path(store) / "values" / digest[:2] / digest

