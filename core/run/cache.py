"""Cache keys, computed once in core so that every backend agrees on what a hit means.

key = sha256(step code fingerprint, each input's content hash). The fingerprint covers the
function's source and an optional explicit version, so a code change invalidates on every
backend; input artifacts are hashed by content (a DataFrame by its values), so the same
inputs hit however they were produced. A failed step never writes an entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from interlock.core.model.spec import StepSpec
from interlock.core.model.values import read_value, value_hash, write_value

KEY_VERSION = "2"  # 2: DataFrame hashes cover dtypes in full; entries carry checksums


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


CHECKSUMS = "CHECKSUMS.json"  # sha256 and size of every file in an entry, written before COMPLETE

log = logging.getLogger("interlock.cache")


def _file_sums(root: Path) -> dict[str, dict[str, Any]]:
    sums: dict[str, dict[str, Any]] = {}
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in (CHECKSUMS, "COMPLETE")):
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        sums[f.relative_to(root).as_posix()] = {"sha256": h.hexdigest(), "size": f.stat().st_size}
    return sums


class LocalCache:
    """Outputs by cache key in a directory; an entry is visible only once complete (rename).

    An entry records the checksum of every file it holds; a read verifies them, so an entry
    that was truncated, edited or half-deleted since is a miss (with a warning), removed, and
    rewritten by the step that runs instead: it never crashes a later run nor feeds it bad data.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _entry(self, step: StepSpec, key: str) -> Path:
        return self.root / step.name / key

    def get(self, step: StepSpec, key: str) -> dict[str, Any] | None:
        entry = self._entry(step, key)
        if not (entry / "COMPLETE").exists():
            return None
        try:
            problem = self._verify(entry)
            if problem is None:
                return {p.name: read_value(p.type, entry / p.name) for p in step.outputs}
        except Exception as exc:  # noqa: BLE001 - any unreadable entry is a miss, never a crash
            problem = f"cannot read it back: {type(exc).__name__}: {exc}"
        log.warning("cache entry %s of step %r is damaged (%s): treating it as a miss and rewriting it",
                    key[:12], step.name, problem)
        self._discard(entry)
        return None

    @staticmethod
    def _verify(entry: Path) -> str | None:
        """What is wrong with an entry's files, or None when they match its checksums."""
        try:
            recorded = json.loads((entry / CHECKSUMS).read_text())
        except (OSError, ValueError) as exc:
            return f"no readable {CHECKSUMS}: {exc}"
        actual = _file_sums(entry)
        if actual != recorded:
            changed = sorted(n for n in set(actual) | set(recorded) if actual.get(n) != recorded.get(n))
            return f"file(s) {changed} do not match their checksums"
        return None

    @staticmethod
    def _discard(entry: Path) -> None:
        # Renamed away first: a concurrent reader sees the entry whole or not at all.
        aside = entry.with_name(f".discard.{entry.name}.{os.getpid()}")
        try:
            os.replace(entry, aside)
        except OSError:
            return
        shutil.rmtree(aside, ignore_errors=True)

    def provenance(self, step: StepSpec, key: str) -> dict[str, Any]:
        """What the producing run declared (snapshots, facts, run id): a hit carries it forward."""
        path = self._entry(step, key) / "provenance.json"
        try:
            return json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            return {}

    def put(self, step: StepSpec, key: str, outputs: dict[str, Any], provenance: dict[str, Any] | None = None) -> None:
        entry = self._entry(step, key)
        if (entry / "COMPLETE").exists():
            return
        entry.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only a cache write; a task that reads its hit never needs it

        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}.", dir=entry.parent))
        try:
            for p in step.outputs:
                write_value(outputs[p.name], p.type, tmp / p.name)
            (tmp / "provenance.json").write_text(json.dumps(provenance or {}, sort_keys=True, default=str))
            (tmp / CHECKSUMS).write_text(json.dumps(_file_sums(tmp), sort_keys=True))
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
