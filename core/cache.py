"""Cache keys, computed once in core so that every backend agrees on what a hit means.

key = sha256(step code fingerprint, each input's content hash). The fingerprint covers the
function's source and an optional explicit version, so a code change invalidates on every
backend; input artifacts are hashed by content (a DataFrame by its values), so the same
inputs hit however they were produced. A failed step never writes an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .spec import StepSpec
from .values import read_value, value_hash, write_value

KEY_VERSION = "1"


def cache_key(step: StepSpec, inputs: dict[str, Any]) -> str:
    ignored = set(step.cache.ignore_inputs) if step.cache else set()
    parts = {
        "v": KEY_VERSION,
        "step": step.name,
        "fingerprint": step.fingerprint,
        "inputs": {
            p.name: value_hash(inputs.get(p.name, p.default), p.type)
            for p in step.inputs
            if p.name not in ignored
        },
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class LocalCache:
    """Outputs by cache key in a directory; an entry is visible only once complete (rename)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _entry(self, step: StepSpec, key: str) -> Path:
        return self.root / step.name / key

    def get(self, step: StepSpec, key: str) -> dict[str, Any] | None:
        entry = self._entry(step, key)
        if not (entry / "COMPLETE").exists():
            return None
        return {p.name: read_value(p.type, entry / p.name) for p in step.outputs}

    def provenance(self, step: StepSpec, key: str) -> dict[str, Any]:
        """What the producing run declared (snapshots, facts, run id): a hit carries it forward."""
        path = self._entry(step, key) / "provenance.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def put(self, step: StepSpec, key: str, outputs: dict[str, Any], provenance: dict[str, Any] | None = None) -> None:
        entry = self._entry(step, key)
        if (entry / "COMPLETE").exists():
            return
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}.", dir=entry.parent))
        try:
            for p in step.outputs:
                write_value(outputs[p.name], p.type, tmp / p.name)
            (tmp / "provenance.json").write_text(json.dumps(provenance or {}, sort_keys=True, default=str))
            (tmp / "COMPLETE").write_text(step.fingerprint)
            os.replace(tmp, entry)
        except OSError:
            if (entry / "COMPLETE").exists():  # a concurrent writer won; same content by key
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
