"""An inter-process lock for one MLflow store.

MLflow has no compare-and-set on registry aliases, and its SQLite tracking and registry
stores run their schema migrations on first use with no lock of their own: two processes
opening a fresh store at once crash one of them (``duplicate column name``, ``table
experiments already exists``, or an "out-of-date schema" read half-way through the other's
migration). For a SQLite store, an exclusive lock on a file next to the database
(``mlflow.db.lock``) serialises both. The kernel drops the lock when its holder dies, so a
killed process never leaves it stuck.

For any other store (a tracking server, a shared Postgres) no file is visible to every
client: ``StoreLock.none()`` holds nothing, and callers re-check what they wrote instead.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .store import MlflowError

DEFAULT_TIMEOUT_S = 120.0  # a migration takes seconds, a promotion milliseconds
_POLL_S = 0.02

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only (sys.platform: mypy reads it)
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class StoreLock:
    """Exclusive across processes (a file lock) and threads; re-entrant in one thread.

    One instance per lock file per process (``StoreLock.at(path)``): flock locks belong to
    an open file, so two instances in one process would block each other, and a nested
    ``hold`` in the same thread (promote -> aliases) must not deadlock.
    """

    _instances: dict[Path, StoreLock] = {}
    _guard = threading.Lock()

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @classmethod
    def at(cls, path: Path) -> StoreLock:
        path = Path(os.path.abspath(path))
        with cls._guard:
            lock = cls._instances.get(path)
            if lock is None:
                lock = cls._instances[path] = cls(path)
            return lock

    @classmethod
    def none(cls) -> StoreLock:
        """A lock that holds nothing (a store no local file can guard)."""
        return cls(None)

    @property
    def real(self) -> bool:
        return self.path is not None

    @contextmanager
    def hold(self, what: str, timeout: float = DEFAULT_TIMEOUT_S) -> Iterator[None]:
        """Hold the lock while ``what`` is done; an error names the lock file after ``timeout`` s."""
        if self.path is None:
            yield
            return
        deadline = time.monotonic() + timeout
        if not self._thread_lock.acquire(timeout=timeout):
            raise self._timed_out(what, timeout)
        try:
            if self._depth == 0:
                self._fd = self._acquire_file(what, timeout, deadline)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fd, self._fd = self._fd, None
                    try:
                        _unlock(fd)
                    finally:
                        os.close(fd)
        finally:
            self._thread_lock.release()

    def _acquire_file(self, what: str, timeout: float, deadline: float) -> int:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise MlflowError(
                f"{what}: cannot open the store's lock file {str(self.path)!r}: {exc}",
                hint="the directory of the SQLite database must be writable by every process that uses it",
            ) from exc
        try:
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise self._timed_out(what, timeout)
                time.sleep(_POLL_S)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _timed_out(self, what: str, timeout: float) -> MlflowError:
        return MlflowError(
            f"{what}: another process held the store's lock {str(self.path)!r} for more than {timeout:g}s",
            retryable=True,
            hint="a process using the same MLflow store is busy or hung; "
            "find it with `fuser` or `lsof` on the lock file",
        )


__all__ = ["DEFAULT_TIMEOUT_S", "StoreLock"]
