"""``LocalCheckpointStore``: checkpoints in a local (or mounted) directory.

Layout, one directory per key (the key percent-encoded into one name, so that keys never
nest into each other)::

    root/
      fraud-retrain%2Frun-42%2Ftrain/
        .lock                      flock held by the writer or pruner of this key
        000000000001/              committed: renamed into place whole
          manifest.json
          data/<file names>
        .tmp-<random>/             a save in progress, or one killed mid-way

A save writes ``data/`` and ``manifest.json``, fsyncs every file and directory in the temp
directory (all at once: see ``_fsync_all``), then renames the temp directory to its id in
the same directory (atomic on POSIX) and fsyncs the key directory. A prune renames a
checkpoint back to a temp name before deleting it, so a reader never sees a half-deleted
committed checkpoint.

Writers of one key are serialised by an flock on ``.lock`` (released by the kernel when a
writer dies), so any temp directory found while holding it is abandoned and is deleted.
Readers take no lock. Without ``fcntl`` (not POSIX) there is no lock and leftovers are
only removed once older than ``stale_after`` seconds.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from interlock.core.base.errors import CheckpointError, SerializationError
from interlock.core.checkpoint.checkpointer import log, remove_tree
from interlock.core.checkpoint.io import (
    DEFAULT_DIGEST,
    IO_CHUNK,
    Hasher,
    HashingWriter,
    check_digest_algorithm,
)
from interlock.core.checkpoint.manifest import (
    CheckpointInfo,
    FileEntry,
    FileSource,
    check_save_args,
    decode_manifest,
    encode_manifest,
    format_checkpoint_id,
    mismatch_error,
    open_inside,
    parse_checkpoint_id,
    path_inside,
    validate_file_names,
    validate_key,
)
from interlock.core.checkpoint.store import LoadedCheckpoint, newest_that_verifies

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["LocalCheckpointStore"]

MANIFEST_NAME = "manifest.json"
DATA_DIR = "data"
TMP_PREFIX = ".tmp-"
LOCK_NAME = ".lock"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Files written but not yet fsynced, held open until the commit fsyncs them together; past
# this many, a save fsyncs and closes those it holds (a sharded model must not run out of fds).
_SYNC_BATCH = 32
_FSYNC_WAVE = 16  # fsyncs in flight at once


def _write_file(out: Any, source: FileSource, algorithm: str) -> FileEntry:
    """Write ``source`` to the new unbuffered file ``out``, hashing each chunk as it is
    written (while it is still in the CPU's cache). Not fsynced: the commit does that."""
    hasher = Hasher(algorithm)
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source)
        view = (view if view.c_contiguous else memoryview(view.tobytes())).cast("B")
        for at in range(0, view.nbytes, IO_CHUNK):
            piece = view[at : at + IO_CHUNK]
            _write_all(out, piece)
            hasher.update(piece)
    else:
        buf = memoryview(bytearray(IO_CHUNK))  # one buffer, reused: no fresh pages per chunk
        with open(source, "rb", buffering=0) as src:
            while n := src.readinto(buf):
                _write_all(out, buf[:n])
                hasher.update(buf[:n])
    return FileEntry(digest=hasher.digest(), size=hasher.size)


def _write_all(out: Any, data: memoryview) -> None:
    """An unbuffered file's write may be partial: finish it."""
    while data:
        data = data[out.write(data) :]


def _fsync_all(fds: list[int]) -> None:
    """fsync every one of ``fds``, at once, and return when all are done (or raise the
    first error). ext4 and XFS commit concurrent fsyncs in one journal transaction: here
    the four of a one-file save (file, data/, manifest, temp dir) cost 16-21 ms one after
    the other and 3-5 ms at once, as much as one."""
    errors: list[BaseException] = []

    def sync(fd: int) -> None:
        try:
            os.fsync(fd)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller
            errors.append(exc)

    # Plain threads, not a pool: a last save from an atexit hook may still start them.
    for at in range(0, len(fds), _FSYNC_WAVE):
        wave = fds[at : at + _FSYNC_WAVE]
        threads = [threading.Thread(target=sync, args=(fd,), name="interlock-fsync") for fd in wave[1:]]
        for t in threads:
            t.start()
        sync(wave[0])
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


_RESCANS = 100


def _churn_error(key: str) -> CheckpointError:
    err = CheckpointError(f"checkpoints of key {key!r} kept vanishing while being read")
    err.retryable = True
    return err


class LocalCheckpointStore:
    """A :class:`~interlock.core.checkpoint.checkpointer.CheckpointStore` on a local directory."""

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        lock_timeout: float = 600.0,
        stale_after: float = 3600.0,
        durable: bool = True,
        digest: str = DEFAULT_DIGEST,
    ) -> None:
        self.root = Path(root)
        self.lock_timeout = lock_timeout
        self.stale_after = stale_after
        # durable=False skips fsync: still atomic for readers and against a killed
        # process, but not against a power loss. For scratch space and tests only.
        self.durable = durable
        # Each file's digest: xxh3_128 (fast, non-cryptographic: against torn and corrupt
        # files) or "sha256" for a cryptographic one, at about a tenth of the speed.
        self.digest = check_digest_algorithm(digest)

    def __repr__(self) -> str:
        return f"LocalCheckpointStore({str(self.root)!r})"

    # --- layout ---

    def key_dir(self, key: str) -> Path:
        name = quote(validate_key(key), safe="")
        if len(name.encode()) > 255:
            raise CheckpointError(
                f"checkpoint key {key!r} is too long for a directory name once encoded",
                hint="use a shorter key (pipeline/run_id/step)",
            )
        return self.root / name

    def checkpoint_dir(self, key: str, checkpoint_id: str) -> Path:
        return self.key_dir(key) / checkpoint_id

    def _candidates(self, kdir: Path) -> list[tuple[int, Path]]:
        """Id-named directories, oldest first (committed or not)."""
        try:
            entries = list(os.scandir(kdir))
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            seq = parse_checkpoint_id(e.name)
            if seq is not None and e.is_dir(follow_symlinks=False):
                out.append((seq, Path(e.path)))
        return sorted(out)

    def _read_info(self, key: str, cdir: Path) -> CheckpointInfo | None:
        """The manifest's info; None when there is no manifest (not committed)."""
        try:
            data = (cdir / MANIFEST_NAME).read_bytes()
        except FileNotFoundError:
            return None
        return decode_manifest(data, key=key, checkpoint_id=cdir.name)

    def _fsync_dir(self, path: Path) -> None:
        if self.durable:
            _fsync_dir(path)

    # --- locking and cleaning ---

    @contextlib.contextmanager
    def _locked(self, kdir: Path) -> Iterator[None]:
        if fcntl is None:  # pragma: no cover - not POSIX
            yield
            return
        fd = os.open(kdir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + self.lock_timeout
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        err = CheckpointError(
                            f"checkpoint directory {kdir} is locked by another writer "
                            f"for over {self.lock_timeout:g}s",
                            hint="another attempt of this step may still be running",
                        )
                        err.retryable = True
                        raise err from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.2)
            yield
        finally:
            os.close(fd)  # releases the flock

    def _clean_leftovers(self, kdir: Path) -> list[str]:
        """Delete abandoned temp directories; call only while holding the key's lock."""
        removed = []
        now = time.time()
        for e in list(os.scandir(kdir)):
            if not e.name.startswith(TMP_PREFIX):
                continue
            if fcntl is None and now - e.stat(follow_symlinks=False).st_mtime < self.stale_after:
                continue  # pragma: no cover - without a lock, a young one may be live
            remove_tree(Path(e.path))
            removed.append(e.name)
        if removed:
            log.info("removed %d abandoned checkpoint temp dir(s) in %s", len(removed), kdir)
        return removed

    # --- the protocol ---

    def save(
        self,
        key: str,
        files: Mapping[str, FileSource],
        *,
        step: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo:
        meta = check_save_args(key, files, step, metadata)  # before writing gigabytes, not after
        with self._save_errors(key):
            session = self._begin(key, step, meta)
            try:
                for name in sorted(files):
                    session.add(name, files[name])
            except BaseException:
                session.abort()
                raise
            return session.commit()

    def begin(
        self, key: str, *, step: int | None = None, metadata: Mapping[str, Any] | None = None
    ) -> LocalCheckpointSession:
        """A checkpoint written file by file (``session.open(name)`` gives a file to write,
        e.g. for ``torch.save``), committed by ``session.commit()``. Holds the key's lock
        until the commit or ``abort()``; ``Checkpointer.open_write``/``writer`` use it."""
        meta = check_save_args(key, {}, step, metadata)
        with self._save_errors(key):
            return self._begin(key, step, meta)

    @contextlib.contextmanager
    def _save_errors(self, key: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            err = CheckpointError(f"cannot save a checkpoint of key {key!r} in {self.key_dir(key)}: {exc}")
            err.retryable = exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)
            raise err from exc

    def _begin(self, key: str, step: int | None, meta: dict[str, Any]) -> LocalCheckpointSession:
        kdir = self.key_dir(key)
        created = not kdir.exists()
        kdir.mkdir(parents=True, exist_ok=True)
        if created:
            self._fsync_dir(kdir.parent)
        return LocalCheckpointSession(self, key, kdir, step, meta)

    def load_latest(
        self, key: str, *, fallback: bool = False, verify: bool = True
    ) -> LoadedCheckpoint | None:
        kdir = self.key_dir(key)
        # A prune renames a checkpoint away whole: a candidate whose directory is gone
        # vanished (a newer one was committed first), and the shared scan lists again.
        return newest_that_verifies(
            key,
            lambda: [cdir for _seq, cdir in self._candidates(kdir)],
            lambda cdir: self._load_verified(key, cdir, verify),
            lambda cdir: not cdir.exists(),
            fallback=fallback,
            rescans=_RESCANS,
            churn=lambda: _churn_error(key),
        )

    def _load_verified(self, key: str, cdir: Path, verify: bool = True) -> LoadedCheckpoint | None:
        """Checkpoint ``cdir`` verified (``verify=False``: its files present, regular and of
        the right size; contents checked as they are read); None without a manifest."""
        try:
            info = self._read_info(key, cdir)
            if info is None:
                return None
            loaded = LoadedCheckpoint(info, self._opener(cdir, info), verified=verify)
            if verify:
                loaded.verify()
            else:
                self._check_sizes(cdir, info)
            return loaded
        except OSError as exc:
            raise CheckpointError(f"checkpoint {cdir.name} of key {key!r}: cannot read: {exc}") from exc

    def _check_sizes(self, cdir: Path, info: CheckpointInfo) -> None:
        data = cdir / DATA_DIR
        if data.is_symlink():
            raise CheckpointError(f"checkpoint {cdir.name}: {data} is a symlink; refusing to follow it")
        for name, entry in info.files.items():
            try:
                st = os.lstat(path_inside(data, name))
            except FileNotFoundError as exc:
                raise mismatch_error(info, name, "file is missing") from exc
            if not stat.S_ISREG(st.st_mode):
                raise mismatch_error(info, name, "not a regular file (a symlink?); refusing to follow it")
            if st.st_size > entry.size:
                raise mismatch_error(info, name, f"longer than {entry.size} bytes")
            if st.st_size != entry.size:
                raise mismatch_error(info, name, f"size expected {entry.size}, got {st.st_size}")

    def _opener(self, cdir: Path, info: CheckpointInfo):
        data = cdir / DATA_DIR

        def open_file(name: str) -> BinaryIO:
            if data.is_symlink():
                raise CheckpointError(f"checkpoint {cdir.name}: {data} is a symlink; refusing to follow it")
            try:
                return open_inside(data, name)
            except FileNotFoundError as exc:
                raise mismatch_error(info, name, "file is missing") from exc

        return open_file

    def list(self, key: str) -> list[CheckpointInfo]:
        kdir = self.key_dir(key)
        for _ in range(_RESCANS):
            out: list[CheckpointInfo] = []
            for _seq, cdir in self._candidates(kdir):
                try:
                    info = self._read_info(key, cdir)
                except CheckpointError as exc:
                    log.warning(
                        "ignoring checkpoint with an invalid manifest in list(): %s", exc.message
                    )
                    continue
                if info is not None:
                    out.append(info)
                elif not cdir.exists():
                    break  # pruned while listing: a newer one may have come; list again
            else:
                return out
        raise _churn_error(key)

    def prune(self, key: str, keep: int) -> builtins.list[CheckpointInfo]:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
            raise CheckpointError(f"prune keep must be an int >= 0, got {keep!r}")
        kdir = self.key_dir(key)
        if not kdir.exists():
            return []
        graves: list[Path] = []
        with self._locked(kdir):
            self._clean_leftovers(kdir)
            committed = self.list(key)
            kept = committed[-keep:] if keep else []
            doomed = committed[: len(committed) - len(kept)]
            # Id-named debris (no or bad manifest) older than the oldest kept goes too.
            kept_from = kept[0].sequence if kept else (None if keep else float("inf"))
            doomed_ids = {i.id for i in doomed}
            for seq, cdir in self._candidates(kdir):
                if cdir.name in doomed_ids or (kept_from is not None and seq < kept_from):
                    grave = kdir / f"{TMP_PREFIX}pruned-{cdir.name}-{secrets.token_hex(4)}"
                    os.rename(cdir, grave)  # uncommit atomically, then delete
                    graves.append(grave)
            self._fsync_dir(kdir)
        # Deleted outside the lock: a save of this key need not wait for the unlinking. A
        # killed prune leaves the renamed debris, which the next save or prune removes.
        for grave in graves:
            remove_tree(grave)
        return doomed


class LocalCheckpointSession:
    """One save in progress: files written into a temp directory under the key's lock,
    committed by renaming it to its id (see ``LocalCheckpointStore.begin``)."""

    def __init__(
        self, store: LocalCheckpointStore, key: str, kdir: Path, step: int | None, metadata: dict[str, Any]
    ) -> None:
        self._store, self._key, self._kdir = store, key, kdir
        self._step, self._metadata = step, metadata
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(store._locked(kdir))
        self._tmp: Path | None = None
        try:
            store._clean_leftovers(kdir)
            tmp = kdir / f"{TMP_PREFIX}{secrets.token_hex(8)}"
            tmp.mkdir()
            self._tmp = tmp
            self._data = tmp / DATA_DIR
            self._data.mkdir()
        except BaseException:
            self.abort()
            raise
        self._entries: dict[str, FileEntry] = {}
        self._dirs = {self._data}
        self._writing: dict[str, HashingWriter] = {}
        self._failed: list[str] = []
        self._unsynced: list[Any] = []  # written, still open, fsynced at the commit
        self.done = False

    def _dest(self, name: str) -> Path:
        if self.done:
            raise CheckpointError(f"checkpoint of key {self._key!r} is already committed or abandoned")
        if name in self._entries or name in self._writing:
            raise CheckpointError(f"checkpoint file {name!r} was already written")
        validate_file_names([*self._entries, *self._writing, name])
        dest = path_inside(self._data, name)
        if dest.parent not in self._dirs:
            dest.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.update([dest.parent, *dest.parent.parents])
        return dest

    def add(self, name: str, source: FileSource) -> FileEntry:
        """Write a whole file from bytes or a path."""
        dest = self._dest(name)
        if not isinstance(source, bytes | bytearray | memoryview):
            # Checked before opening: opening a FIFO would block.
            if not stat.S_ISREG(os.stat(source).st_mode):
                raise SerializationError(f"cannot checkpoint {os.fspath(source)}: not a regular file")
        out = open(dest, "xb", buffering=0)  # noqa: SIM115 - held until the commit fsyncs it
        try:
            entry = _write_file(out, source, self._store.digest)
        except BaseException:
            out.close()
            raise
        self._hold(out)
        self._entries[name] = entry
        return entry

    def open(self, name: str) -> BinaryIO:
        """A new file of this checkpoint, opened for writing (hashed as written, fsynced by
        the commit). Close it before the commit."""
        dest = self._dest(name)
        writer = HashingWriter(
            open(dest, "xb"),  # noqa: SIM115 - handed back to _closed, held until the commit
            lambda w, out: self._closed(name, w, out),
            self._store.digest,
        )
        self._writing[name] = writer
        return writer

    def _closed(self, name: str, writer: HashingWriter, out: Any) -> None:
        self._writing.pop(name, None)
        if writer.failed:
            out.close()
            self._failed.append(name)
        else:
            self._hold(out)
            self._entries[name] = FileEntry(digest=writer.digest(), size=writer.size)

    def _hold(self, out: Any) -> None:
        """Keep written file ``out`` open for the commit's fsync (closed at once when the
        store is not durable)."""
        if not self._store.durable:
            out.close()
            return
        self._unsynced.append(out)
        if len(self._unsynced) >= _SYNC_BATCH:
            self._sync()

    def _sync(self, dirs: Sequence[Path] = ()) -> None:
        """fsync the files held open and ``dirs``, all at once; close them."""
        fds = [os.open(d, os.O_RDONLY) for d in dirs]
        try:
            _fsync_all([f.fileno() for f in self._unsynced] + fds)
        finally:
            for fd in fds:
                os.close(fd)
            self._close_unsynced()

    def _close_unsynced(self) -> None:
        files, self._unsynced = self._unsynced, []
        for f in files:
            with contextlib.suppress(OSError):
                f.close()

    def commit(self) -> CheckpointInfo:
        if self.done or self._tmp is None:
            raise CheckpointError(f"checkpoint of key {self._key!r} is already committed or abandoned")
        try:
            if self._writing or self._failed:
                raise CheckpointError(
                    f"cannot commit the checkpoint of key {self._key!r}: file(s) "
                    f"{sorted(self._writing) or self._failed} "
                    + ("still open" if self._writing else "failed while being written")
                )
            store, kdir, tmp = self._store, self._kdir, self._tmp
            # The id is chosen under the lock, above every id-named directory present
            # (even uncommitted ones), so the rename below never meets an existing name.
            existing = store._candidates(kdir)
            seq = existing[-1][0] + 1 if existing else 1
            info = CheckpointInfo(
                key=self._key,
                id=format_checkpoint_id(seq),
                step=self._step,
                created_at=time.time(),
                files=dict(self._entries),
                metadata=self._metadata,
            )
            manifest = encode_manifest(info)
            out = open(tmp / MANIFEST_NAME, "xb", buffering=0)  # noqa: SIM115 - held for the fsync
            self._unsynced.append(out)
            _write_all(out, memoryview(manifest))
            if store.durable:
                # Every file, data directory, the manifest and the temp directory: durable
                # before the rename makes them a checkpoint.
                self._sync([*sorted(p for p in self._dirs if p.is_relative_to(self._data)), tmp])
            self._close_unsynced()
            os.rename(tmp, kdir / info.id)  # the commit point
            self._tmp = None
            store._fsync_dir(kdir)
        except BaseException:
            self.abort()
            raise
        self.done = True
        self._stack.close()  # releases the lock
        return info

    def abort(self) -> None:
        """Abandon this checkpoint: nothing of it is ever loaded."""
        self.done = True
        for writer in list(self._writing.values()):
            with contextlib.suppress(Exception):
                writer.failed = True
                writer.close()
        self._close_unsynced()
        if self._tmp is not None:
            remove_tree(self._tmp)
            self._tmp = None
        self._stack.close()
