"""Temporary directories interlock makes for a step, and their removal.

``il.Model.new()``/``il.Dataset.new()`` give a step an empty directory to write into, and
``ctx.checkpoint.load()`` restores a directory checkpoint into a fresh one. Once the step's
outputs are written to the port (a copy), those directories are scratch: with real models,
gigabytes per run. Every such directory is registered here and removed at the end of the
run (``scope()``, around a backend's run) or, in a step's own process (a KFP container, a
kfp-local subprocess), when that process exits.
"""

from __future__ import annotations

import atexit
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

_lock = threading.Lock()
_owned: list[Path] = []


def make_temp_dir(prefix: str) -> Path:
    """A new directory under $TMPDIR that interlock removes when the run (or process) ends."""
    import tempfile  # most tasks never make one

    path = Path(tempfile.mkdtemp(prefix=prefix))
    with _lock:
        _owned.append(path)
    return path


def release(keep: Iterable[Path] = (), since: int = 0) -> None:
    """Remove the directories registered after the first ``since``, except those in ``keep``
    (or holding one: a run's returned Model still points into its directory)."""
    kept = [Path(k) for k in keep]
    with _lock:
        doomed = [p for p in _owned[since:] if not any(k == p or p in k.parents for k in kept)]
        _owned[since:] = [p for p in _owned[since:] if p not in doomed]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)


def mark() -> int:
    with _lock:
        return len(_owned)


@contextmanager
def scope() -> Iterator[list[Path]]:
    """Remove, on exit, what was registered inside; add paths to the yielded list to keep them."""
    start = mark()
    keep: list[Path] = []
    try:
        yield keep
    finally:
        release(keep, since=start)


atexit.register(release)
