"""``Checkpointer``: ``ctx.checkpoint``, a step's checkpoints under its key.

``save``/``load`` of bytes, JSON, a file or a directory; streamed writers (``open_write``)
and readers (``open_read``); the background prune that keeps ``CheckpointPolicy.keep``.
The key is stable across the retries of one run, so a retry resumes and a new run starts
fresh. Pickle is never used: states are raw bytes, JSON, or files.

Speed: every read hashes what it reads once (``io.py``), so ``Checkpointer.load`` asks the
store for ``verify=False`` and lets the reads check: one pass over the data, one buffer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from interlock.core.base.errors import CheckpointError, SerializationError
from interlock.core.base.scratch import make_temp_dir
from interlock.core.checkpoint.manifest import (
    RESERVED_META,
    CheckpointInfo,
    FileSource,
    check_metadata,
    path_inside,
    validate_file_name,
    validate_file_names,
    validate_key,
)
from interlock.core.checkpoint.store import CheckpointStore, LoadedCheckpoint

__all__ = ["CheckpointWriter", "Checkpointer", "wait_for_prunes"]

log = logging.getLogger("interlock.checkpoint")

_C = TypeVar("_C")


# --- Checkpointer (ctx.checkpoint) -----------------------------------------------------

KIND_KEY = "interlock.kind"
EMPTY_DIRS_KEY = "interlock.empty_dirs"
FILE_NAME_KEY = "interlock.file_name"
_BYTES_NAME = "state.bin"
_JSON_NAME = "state.json"


def _directory_files(root: Path) -> tuple[dict[str, Path], list[str]]:
    """Every regular file under ``root`` by relative POSIX name, and the empty directories.

    File symlinks are saved as their content; directory symlinks are refused (they may
    point outside the tree or loop).
    """
    files: dict[str, Path] = {}
    empty: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for d in dirnames:
            if (here / d).is_symlink():
                raise SerializationError(
                    f"cannot checkpoint directory {root}: {here / d} is a symlink to a directory"
                )
        for f in filenames:
            p = here / f
            if not p.is_file():
                raise SerializationError(f"cannot checkpoint {p}: not a regular file")
            files[p.relative_to(root).as_posix()] = p
        if not dirnames and not filenames and here != root:
            empty.append(here.relative_to(root).as_posix())
    return files, sorted(empty)


class Checkpointer:
    """What a step sees as ``ctx.checkpoint``: a store bound to one key and a keep count.

    ``save(state)`` accepts ``bytes``, a JSON-able ``dict``/``list``, or a ``pathlib.Path``
    to a directory (saved file by file) or a file. The kind is recorded in the manifest and
    ``load()`` returns the same kind: bytes, the JSON value, or a ``Path`` where the
    directory (or file) was restored. A plain ``str`` is refused: wrap paths in ``Path``.

    For states larger than memory, stream them: ``open_write(name)`` gives a file to write
    (``torch.save(state, f)``), committed when the ``with`` block ends; ``open_read(name)``
    gives the file back, checked against its manifest as it is read (``torch.load(f)``).

    Pruning (``keep``) runs on a worker thread after each commit, outside the save: the
    save returns once its checkpoint is committed. ``flush()`` waits for it; the next save,
    the end of the step (the runtime) and the end of the process wait for it too. A prune
    only ever deletes checkpoints older than the newest ``keep``, so a prune killed at any
    moment never touches the checkpoint just committed, and the next one finishes its work.
    """

    def __init__(
        self,
        store: CheckpointStore,
        key: str,
        *,
        keep: int | None = 2,
        fallback: bool = False,
    ) -> None:
        if keep is not None and (not isinstance(keep, int) or keep < 1):
            raise CheckpointError(f"Checkpointer keep must be a positive int or None, got {keep!r}")
        self.store = store
        self.key = validate_key(key)
        self.keep = keep
        self.fallback = fallback
        self._pruner = _BackgroundPrune(store, self.key, keep) if keep is not None else None

    def __repr__(self) -> str:
        return f"Checkpointer(key={self.key!r}, keep={self.keep!r}, store={self.store!r})"

    # --- saving ---

    def _user_metadata(self, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        meta = dict(metadata or {})
        reserved = [k for k in meta if k.startswith(RESERVED_META)]
        if reserved:
            raise CheckpointError(
                f"checkpoint metadata keys starting with 'interlock.' are reserved: {reserved}"
            )
        return meta

    def save(
        self,
        state: Any,
        *,
        step: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo:
        meta = self._user_metadata(metadata)
        files: dict[str, FileSource]
        if isinstance(state, bytes | bytearray | memoryview):
            files, meta[KIND_KEY] = {_BYTES_NAME: state}, "bytes"
        elif isinstance(state, dict | list):
            try:
                data = json.dumps(state, ensure_ascii=False).encode()
            except (TypeError, ValueError) as exc:
                raise SerializationError(
                    f"checkpoint state for key {self.key!r} is not JSON-able: {exc}",
                    hint="save bytes (e.g. torch.save into a BytesIO) or a directory Path instead",
                ) from exc
            files, meta[KIND_KEY] = {_JSON_NAME: data}, "json"
        elif isinstance(state, os.PathLike):
            path = Path(state)
            if path.is_dir():
                dir_files, empty = _directory_files(path)
                files = dict(dir_files)
                meta[KIND_KEY], meta[EMPTY_DIRS_KEY] = "directory", empty
            elif path.is_file():
                files = {path.name: path}
                meta[KIND_KEY], meta[FILE_NAME_KEY] = "file", path.name
            else:
                raise SerializationError(f"cannot checkpoint {path}: no such file or directory")
        else:
            raise SerializationError(
                f"cannot checkpoint a {type(state).__name__} for key {self.key!r}",
                hint="save bytes, a JSON-able dict or list, or a pathlib.Path to a directory or file"
                + (
                    "; a str is ambiguous: wrap a path in pathlib.Path"
                    if isinstance(state, str)
                    else ""
                ),
            )
        t0 = time.perf_counter()
        info = self.store.save(self.key, files, step=step, metadata=meta)
        self.wrote(time.perf_counter() - t0)
        self.committed(info)
        return info

    def wrote(self, seconds: float) -> None:
        """Called with how long each committed checkpoint took to write (``save``, and a
        stream from its opening, the step's own serialization included); the shim counts it."""

    def committed(self, info: CheckpointInfo) -> None:
        """Called once a save (or a streamed write) has committed ``info``: starts the prune."""
        if self._pruner is not None:
            self._pruner.request()

    def flush(self) -> None:
        """Wait until the pruning started by earlier saves is done."""
        if self._pruner is not None:
            self._pruner.wait()

    def writer(
        self, *, step: int | None = None, metadata: Mapping[str, Any] | None = None
    ) -> CheckpointWriter:
        """A checkpoint of several files written as streams; committed at the end of ``with``.

        ::

            with ctx.checkpoint.writer(step=epoch) as w:
                with w.open("model.pt") as f:
                    torch.save(model.state_dict(), f)
                with w.open("optim.pt") as f:
                    torch.save(optimizer.state_dict(), f)
            # committed here; load() restores it as a directory, open_read("model.pt") reads one
        """
        meta = self._user_metadata(metadata)
        meta[KIND_KEY], meta[EMPTY_DIRS_KEY] = "directory", []
        return CheckpointWriter(self, step, meta)

    @contextlib.contextmanager
    def open_write(
        self,
        name: str = "state.pt",
        *,
        step: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Iterator[BinaryIO]:
        """One file of a new checkpoint, opened for writing; committed when ``with`` ends.

        ::

            with ctx.checkpoint.open_write("state.pt", step=epoch) as f:
                torch.save({"model": model.state_dict(), "epoch": epoch}, f)

        Written and hashed as it streams (a local store writes it in place, fsyncs it, and
        commits the manifest after the block): never held in memory whole. An exception in
        the block abandons the checkpoint. ``load()`` restores it as a file (a ``Path``).
        """
        validate_file_name(name)
        if "/" in name:
            raise CheckpointError(f"open_write takes a plain file name, got {name!r}; use writer() for a tree")
        meta = self._user_metadata(metadata)
        meta[KIND_KEY], meta[FILE_NAME_KEY] = "file", name
        with CheckpointWriter(self, step, meta) as w, w.open(name) as f:
            yield f

    # --- loading ---

    def _latest(self) -> LoadedCheckpoint | None:
        """The newest checkpoint, to be checked as it is read (one pass over the data)."""
        return self.store.load_latest(self.key, fallback=self.fallback, verify=False)

    def _read(self, use: Callable[[LoadedCheckpoint], _C]) -> _C | None:
        loaded = self._latest()
        if loaded is None:
            return None
        try:
            return use(loaded)
        except CheckpointError:
            if loaded.verified:
                raise
        # It did not verify as it was read (or was pruned meanwhile): the verifying scan
        # decides, as load_latest always does: refuse, rescan, or (fallback) an older one.
        loaded = self.store.load_latest(self.key, fallback=self.fallback)
        return None if loaded is None else use(loaded)

    def load(self, dest: str | os.PathLike | None = None) -> Any:
        """The latest committed state, or None. Raises CheckpointError on corruption.

        Each file is read and hashed once, and nothing is returned or left in ``dest``
        unless it matches the manifest. For a directory (or file) checkpoint, ``dest`` is
        the directory to restore into (created if missing, must be empty); by default a
        fresh temporary directory.
        """
        return self._read(lambda loaded: self._value(loaded, dest))

    def _value(self, loaded: LoadedCheckpoint, dest: str | os.PathLike | None) -> Any:
        kind = loaded.info.metadata.get(KIND_KEY)
        if kind == "bytes":
            return loaded.read_bytes(_BYTES_NAME)
        if kind == "json":
            try:
                return json.loads(loaded.read_bytes(_JSON_NAME))
            except ValueError as exc:  # checksummed, so only a bug could get here
                raise CheckpointError(
                    f"checkpoint {loaded.info.id} of key {self.key!r}: bad JSON: {exc}"
                ) from exc
        if kind in ("directory", "file"):
            if kind == "file":
                self._file_name(loaded)
            target = self._restore_dir(dest)
            self._restore(loaded, target)
            if kind == "file":
                return path_inside(target, loaded.info.metadata[FILE_NAME_KEY])
            return target
        raise CheckpointError(
            f"checkpoint {loaded.info.id} of key {self.key!r} has unknown kind {kind!r}",
            hint="it was not written by Checkpointer.save; read it with store.load_latest()",
        )

    def _file_name(self, loaded: LoadedCheckpoint) -> str:
        # The name comes from the manifest: one of its files, one segment, or refused.
        file_name = loaded.info.metadata.get(FILE_NAME_KEY)
        if not isinstance(file_name, str) or "/" in file_name or file_name not in loaded.names:
            raise CheckpointError(
                f"checkpoint {loaded.info.id} of key {self.key!r}: file name {file_name!r} "
                "is not one of its files",
                hint="the manifest was not written by Checkpointer.save (forged or damaged)",
            )
        return validate_file_name(file_name)

    def _restore(self, loaded: LoadedCheckpoint, target: Path) -> None:
        """Every file (and empty directory) into ``target``, all verified, or nothing.

        Restored into a staging directory inside ``target`` first, then moved into place:
        a file that fails its check leaves nothing behind.
        """
        staging = target / f".interlock-restore-{os.urandom(6).hex()}"
        try:
            staging.mkdir()
            loaded.copy_to(staging)
            for d in loaded.info.metadata.get(EMPTY_DIRS_KEY, []):
                path_inside(staging, d).mkdir(parents=True, exist_ok=True)
            for entry in os.listdir(staging):
                os.rename(staging / entry, target / entry)
            staging.rmdir()
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _single_name(self, loaded: LoadedCheckpoint) -> str:
        kind = loaded.info.metadata.get(KIND_KEY)
        if kind == "file":
            return self._file_name(loaded)
        if kind in ("bytes", "json"):
            return _BYTES_NAME if kind == "bytes" else _JSON_NAME
        if len(loaded.names) == 1:
            return loaded.names[0]
        raise CheckpointError(
            f"checkpoint {loaded.info.id} of key {self.key!r} has {len(loaded.names)} files; "
            f"say which to open: {loaded.names[:5]}"
        )

    @contextlib.contextmanager
    def open_read(self, name: str | None = None, *, seekable: bool = True) -> Iterator[BinaryIO]:
        """A file of the latest checkpoint, opened for reading and checked as it is read.

        ::

            if ctx.checkpoint.latest is not None:
                with ctx.checkpoint.open_read("state.pt") as f:
                    state = torch.load(f)

        ``name`` may be left out when the checkpoint has one file (``open_write``,
        ``save(bytes)``). The file is read once and hashed on the way; the read that would
        return its final bytes raises ``CheckpointError`` instead if it does not match the
        manifest (so ``torch.load`` fails rather than finishing on corrupt data). Seeking
        works (``torch.load`` needs it): from an object store, ``seekable=True`` copies the
        file to an anonymous local temporary file first, verified before the first byte is
        handed out; ``seekable=False`` streams it front to back instead. With
        ``fallback=True`` the whole checkpoint is verified before it is opened. Raises
        CheckpointError when there is no checkpoint.
        """
        if self.fallback:
            loaded = self.store.load_latest(self.key, fallback=True)
        else:
            loaded = self._latest()
        if loaded is None:
            raise CheckpointError(
                f"no committed checkpoint of key {self.key!r} to open",
                hint="check ctx.checkpoint.latest first (None on a fresh start)",
            )
        f = loaded.open(name if name is not None else self._single_name(loaded), seekable=seekable)
        try:
            yield f
        finally:
            f.close()

    @staticmethod
    def _restore_dir(dest: str | os.PathLike | None) -> Path:
        if dest is None:  # scratch for the step: removed when the run ends
            return make_temp_dir("interlock-ckpt-")
        target = Path(dest)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise CheckpointError(
                f"cannot restore a checkpoint into {target}: not an empty directory"
            )
        target.mkdir(parents=True, exist_ok=True)
        return target

    @property
    def latest(self) -> CheckpointInfo | None:
        infos = self.store.list(self.key)
        return infos[-1] if infos else None

    @property
    def latest_step(self) -> int | None:
        latest = self.latest
        return latest.step if latest else None


class CheckpointWriter:
    """The files of one new checkpoint, written as streams and committed together.

    ``open(name)`` gives a binary file to write (hashed as written). The checkpoint is
    committed when the ``with`` block ends without an exception (or by ``commit()``), and
    abandoned otherwise: readers never see it until then. Stores with a ``begin`` method
    (the local store) write in place; others get the files spooled to a local temporary
    directory and uploaded by ``store.save`` at the commit.
    """

    def __init__(self, owner: Checkpointer, step: int | None, metadata: dict[str, Any]) -> None:
        self._owner = owner
        self._began = time.perf_counter()
        begin = getattr(owner.store, "begin", None)
        if begin is not None:
            self._session: Any = begin(owner.key, step=step, metadata=metadata)
        else:
            self._session = _SpooledSession(owner.store, owner.key, step, metadata)
        self.info: CheckpointInfo | None = None

    def open(self, name: str) -> BinaryIO:
        result: BinaryIO = self._session.open(name)
        return result

    def commit(self) -> CheckpointInfo:
        info: CheckpointInfo = self._session.commit()
        self.info = info
        self._owner.wrote(time.perf_counter() - self._began)
        self._owner.committed(info)
        return info

    def abort(self) -> None:
        self._session.abort()

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class _SpooledSession:
    """Streamed writes for a store without ``begin``: files in a local temporary directory,
    saved with ``store.save`` at the commit."""

    def __init__(self, store: CheckpointStore, key: str, step: int | None, metadata: dict[str, Any]) -> None:
        import tempfile

        check_metadata(metadata, key)
        self._store, self._key, self._step, self._meta = store, key, step, metadata
        self._dir = Path(tempfile.mkdtemp(prefix="interlock-ckpt-write-"))
        self._files: dict[str, FileSource] = {}

    def open(self, name: str) -> BinaryIO:
        validate_file_names([*self._files, name])
        if name in self._files:
            raise CheckpointError(f"checkpoint file {name!r} was already written")
        path = path_inside(self._dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._files[name] = path
        return open(path, "xb")  # noqa: SIM115 - the caller closes it

    def commit(self) -> CheckpointInfo:
        try:
            return self._store.save(self._key, self._files, step=self._step, metadata=self._meta)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class _BackgroundPrune:
    """Prunes one key on a worker thread after each commit: off the save's critical path.

    One worker per key at a time; a commit while it runs asks for one more round (prune
    is idempotent: keep the newest ``keep``). The thread is not a daemon, so the process
    finishes the prune before it exits; ``wait_for_prunes()`` (the runtime calls it when a
    step ends) and ``wait()`` wait for it. A failed prune is logged (an old checkpoint left
    behind costs space only) and the next commit tries again.
    """

    def __init__(self, store: CheckpointStore, key: str, keep: int) -> None:
        self._store, self._key, self._keep = store, key, keep
        self._cond = threading.Condition()
        self._wanted = False
        self._running = False

    def request(self) -> None:
        with self._cond:
            self._wanted = True
            if self._running:
                return
            self._running = True
            with _PENDING_LOCK:
                _PENDING.add(self)
        threading.Thread(target=self._run, name=f"interlock-prune-{self._key}", daemon=False).start()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._wanted:
                    self._running = False
                    with _PENDING_LOCK:
                        _PENDING.discard(self)
                    self._cond.notify_all()
                    return
                self._wanted = False
            try:
                self._store.prune(self._key, self._keep)
            except Exception as exc:  # noqa: BLE001 - logged: the commit stands either way
                log.warning("checkpoints of key %r committed, but pruning failed: %s", self._key, exc)

    def wait(self) -> None:
        with self._cond:
            while self._running:
                self._cond.wait()


_PENDING: set[_BackgroundPrune] = set()
_PENDING_LOCK = threading.Lock()


def wait_for_prunes() -> None:
    """Wait for every checkpoint prune still running in this process."""
    with _PENDING_LOCK:
        pending = list(_PENDING)
    for pruner in pending:
        pruner.wait()


def remove_tree(path: Path) -> None:
    """Best-effort delete used by stores for abandoned or pruned directories."""
    shutil.rmtree(path, ignore_errors=True)


