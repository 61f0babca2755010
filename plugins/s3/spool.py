"""Local copies of a loaded checkpoint's files, made while they are first streamed.

``load_latest`` verifies every file (one full read), then the caller reads them again
(``read_bytes``, ``copy_to``). From S3 that would download everything twice. A spool keeps
what the verifying read streamed in a temporary directory, and later reads open the local
copy. ``LoadedCheckpoint`` re-hashes on every read, so a local copy that changed is still
refused. The directory goes when the ``LoadedCheckpoint`` is garbage collected (or at
exit).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any


class Spool:
    def __init__(self, parent: str | os.PathLike | None = None) -> None:
        self._parent = parent
        self._dir: Path | None = None
        self._done: dict[str, Path] = {}
        self._count = 0
        self._lock = threading.Lock()

    def local(self, name: str) -> Path | None:
        """The complete local copy of ``name``, if a read has made one."""
        with self._lock:
            return self._done.get(name)

    def tee(self, name: str, body: Any) -> _Tee:
        """A reader of ``body`` that also writes what it reads to a local copy."""
        with self._lock:
            if self._dir is None:
                self._dir = Path(tempfile.mkdtemp(prefix="interlock-s3-", dir=self._parent))
            self._count += 1
            path = self._dir / f"{self._count}.part"
        return _Tee(self, name, body, path)

    def _finish(self, name: str, part: Path) -> None:
        final = part.with_suffix(".bin")
        os.replace(part, final)
        with self._lock:
            self._done[name] = final

    def cleanup(self) -> None:
        with self._lock:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            self._done.clear()


class _Tee:
    def __init__(self, spool: Spool, name: str, body: Any, part: Path) -> None:
        self._spool = spool
        self._name = name
        self._body = body
        self._part = part
        self._out: Any = open(part, "wb")  # noqa: SIM115 - closed at EOF or in close()

    def read(self, amount: int = -1) -> bytes:
        data = self._body.read(amount)
        if self._out is not None:
            try:
                if data:
                    self._out.write(data)
                elif amount != 0:  # end of the object: the copy is whole
                    self._out.close()
                    self._out = None
                    self._spool._finish(self._name, self._part)
            except OSError:  # a full disk costs a second download, not the load
                self._abandon()
        return data

    def _abandon(self) -> None:
        if self._out is not None:
            try:
                self._out.close()
            except OSError:
                pass
            self._out = None
        self._part.unlink(missing_ok=True)

    def close(self) -> None:
        self._body.close()
        if self._out is not None:  # stopped early: the copy is partial
            self._abandon()
