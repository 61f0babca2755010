"""The checkpoint store protocol, the scan every store's ``load_latest`` shares, and the
store for a URI (a local path, or a scheme a plugin registers: ``s3://``).

Corruption policy: a committed checkpoint whose files do not match its manifest (or whose
manifest fails its own checksum) is *refused* with :class:`CheckpointError` naming the key,
the checkpoint id and the file. ``load_latest(..., fallback=True)`` opts in to skipping
corrupt checkpoints (with a warning) in favour of the newest one that verifies. Returning
bad data silently, or silently rolling back, is never the default.

Writing a store (the S3 one, say): pick the next id (``format_checkpoint_id``) above every
id present, committed or not; validate names with ``validate_key``/``validate_file_names``;
upload the files; then write ``encode_manifest(info)`` as one object, last. ``list`` and
``load_latest`` read manifests with ``decode_manifest`` (which checks the manifest's own
checksum and its key and id), skip ids that have no manifest, and return a
``LoadedCheckpoint(info, opener, verified=True)`` after ``verify()`` (with
``verify=False``: after checking each file's presence and size only, ``verified=False``);
``load_latest`` is ``newest_that_verifies`` over the store's listing. Run
tests/checkpoints/contract.py against it.
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar, runtime_checkable

from interlock.core.base.errors import CheckpointError
from interlock.core.checkpoint.io import digest_detail, digest_of
from interlock.core.checkpoint.manifest import (
    CheckpointInfo,
    FileEntry,
    FileSource,
    mismatch_error,
    path_inside,
)

log = logging.getLogger("interlock.checkpoint")


class LoadedCheckpoint:
    """A committed checkpoint whose files are checked against the manifest as they are read.

    Every read hashes what it reads (once) and refuses a mismatch before the data is handed
    out: ``read_bytes`` returns only verified bytes, ``copy_to`` removes what it wrote and
    raises, and ``open(name)`` raises on the read that would return the file's final bytes.
    ``verified`` says whether every file was already checked when the checkpoint was
    loaded (``load_latest(key)``, the default); ``load_latest(key, verify=False)`` checks
    the manifest and each file's presence and size only, and leaves the contents to the
    read that hands them out: one pass over the data instead of two.

    ``opener(name)`` opens a file for reading; stores supply it and it must return a binary
    file object usable in ``with`` (wrap a boto3 ``StreamingBody`` in ``contextlib.closing``).
    """

    def __init__(
        self,
        info: CheckpointInfo,
        opener: Callable[[str], AbstractContextManager[BinaryIO]],
        *,
        verified: bool = False,
    ) -> None:
        self.info = info
        self._opener = opener
        self.verified = verified

    def __repr__(self) -> str:
        return (
            f"LoadedCheckpoint(key={self.info.key!r}, id={self.info.id!r}, step={self.info.step!r})"
        )

    @property
    def names(self) -> list[str]:
        return sorted(self.info.files)

    def _entry(self, name: str) -> FileEntry:
        entry = self.info.files.get(name)
        if entry is None:
            raise CheckpointError(
                f"checkpoint {self.info.id} of key {self.info.key!r} has no file {name!r}"
            )
        return entry

    def _cannot_read(self, name: str, exc: OSError) -> CheckpointError:
        return CheckpointError(
            f"checkpoint {self.info.id} of key {self.info.key!r}: cannot read file {name!r}: {exc}"
        )

    def open(self, name: str, *, seekable: bool = False) -> BinaryIO:
        """File ``name`` opened for reading, checked as it streams (a ``VerifyingReader``).

        The read that would return the file's final bytes raises ``CheckpointError``
        instead when the file does not match its manifest; so does any read at or past the
        end. Seekable when the store's file is (local stores). ``seekable=True`` (what
        ``torch.load`` needs) makes a stream that is not (an object store) seekable by
        first copying it to an anonymous local temporary file, verified on the way: then
        nothing is handed out before the whole file verified.
        """
        from interlock.core.checkpoint.io import IO_CHUNK, VerifyingReader

        entry = self._entry(name)
        try:
            opened = self._opener(name)
            raw = opened.__enter__()
        except OSError as exc:
            raise self._cannot_read(name, exc) from exc
        reader = VerifyingReader(
            raw, self.info, name, entry, on_close=lambda: opened.__exit__(None, None, None)
        )
        if not seekable or reader.seekable():
            return reader
        import tempfile

        spool = tempfile.TemporaryFile(prefix="interlock-ckpt-")  # noqa: SIM115 - returned
        try:
            with reader:
                while chunk := reader.read(IO_CHUNK):
                    spool.write(chunk)
            spool.flush()
            spool.seek(0)
        except BaseException:
            spool.close()
            raise
        return spool

    def _chunks(self, name: str) -> Iterator[bytes]:
        """The bytes of ``name`` in chunks; raises before yielding the final one if it
        does not match the manifest."""
        from interlock.core.checkpoint.io import IO_CHUNK

        with self.open(name) as f:
            while chunk := f.read(IO_CHUNK):
                yield chunk

    def verify(self) -> None:
        """Read every file and check it against the manifest; raise CheckpointError if not."""
        for name in self.names:
            for _ in self._chunks(name):
                pass

    def read_bytes(self, name: str) -> bytes:
        """The content of ``name``, verified. One read into one buffer: the peak memory is
        the file's size (a local file is read with one allocation, sized from the file)."""
        entry = self._entry(name)
        try:
            with self._opener(name) as f:
                data = f.read()
        except OSError as exc:
            raise self._cannot_read(name, exc) from exc
        if len(data) > entry.size:
            raise mismatch_error(self.info, name, f"longer than {entry.size} bytes")
        if len(data) != entry.size:
            raise mismatch_error(self.info, name, f"size expected {entry.size}, got {len(data)}")
        digest = digest_of(entry.algorithm, data)
        if digest != entry.digest:
            raise mismatch_error(self.info, name, digest_detail(entry, digest))
        return data

    def copy_to(self, dest: str | os.PathLike) -> Path:
        """Write every file under ``dest`` (created if missing); returns ``dest``.

        One pass per file: read, written and hashed at once. A file that does not match its
        manifest is removed again before CheckpointError is raised (``Checkpointer.load``
        restores into a staging directory, so that nothing of a bad checkpoint remains).
        """
        dest = Path(dest)
        for name in self.names:
            target = path_inside(dest, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with open(target, "wb") as out:
                    for chunk in self._chunks(name):
                        out.write(chunk)
            except BaseException:
                target.unlink(missing_ok=True)
                raise
        return dest


@runtime_checkable
class CheckpointStore(Protocol):
    """Where checkpoints live. Every method is safe against a writer killed at any moment.

    - ``save``: write the files, make them durable, commit a manifest last; returns the
      committed info. Ids increase strictly per key.
    - ``load_latest``: the newest committed checkpoint, verified against its manifest, or
      None. A corrupt newest checkpoint raises CheckpointError unless ``fallback=True``.
      ``verify=False``: check the manifest and each file's presence and size only; the
      contents are checked by the reads of the returned ``LoadedCheckpoint`` (one pass
      over the data instead of two). ``fallback`` then only skips bad manifests and
      missing or mis-sized files.
    - ``list``: committed checkpoints (valid manifest), oldest first; files not re-hashed.
    - ``prune``: delete all but the newest ``keep``; returns the removed ones, oldest first.
    """

    def save(
        self,
        key: str,
        files: Mapping[str, FileSource],
        *,
        step: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo: ...

    def load_latest(
        self, key: str, *, fallback: bool = False, verify: bool = True
    ) -> LoadedCheckpoint | None: ...

    def list(self, key: str) -> list[CheckpointInfo]: ...

    def prune(self, key: str, keep: int) -> builtins.list[CheckpointInfo]: ...


_C = TypeVar("_C")


_VANISHED = object()


def newest_that_verifies(
    key: str,
    scan: Callable[[], Sequence[_C]],
    load: Callable[[_C], LoadedCheckpoint | None],
    vanished: Callable[[_C], bool],
    *,
    fallback: bool,
    rescans: int,
    churn: Callable[[], CheckpointError],
    service_errors: tuple[type[Exception], ...] = (),
) -> LoadedCheckpoint | None:
    """The newest committed checkpoint of ``key`` that verifies: ``load_latest`` for any store.

    ``scan()`` lists the key's candidates oldest first (committed or not); ``load(c)`` reads
    and verifies one, returning None when it has no manifest (not committed: skipped) and
    raising CheckpointError when it is corrupt or unreadable; ``vanished(c)`` says whether it
    was deleted since the scan. A concurrent save+prune deletes a checkpoint only after
    committing a newer one, so a vanished candidate means "scan again" (at most ``rescans``
    times, then ``churn()`` is raised). A corrupt newest checkpoint is raised unless
    ``fallback``: then older ones are tried, each skip logged. ``service_errors`` (the store
    could not ask: no evidence of corruption) propagate at once.
    """
    for _ in range(rescans):
        result = _newest_once(key, scan(), load, vanished, fallback, service_errors)
        if result is not _VANISHED:
            return result  # type: ignore[return-value]
    raise churn()


def _newest_once(
    key: str,
    candidates: Sequence[_C],
    load: Callable[[_C], LoadedCheckpoint | None],
    vanished: Callable[[_C], bool],
    fallback: bool,
    service_errors: tuple[type[Exception], ...],
) -> object:
    first_error: CheckpointError | None = None
    for candidate in reversed(candidates):
        try:
            loaded = load(candidate)
        except service_errors:
            raise
        except CheckpointError as exc:
            if vanished(candidate):
                return _VANISHED  # pruned while we read it
            if not fallback:
                raise
            first_error = first_error or exc
            log.warning("skipping corrupt checkpoint (fallback=True): %s", exc.message)
            continue
        if loaded is not None:
            return loaded
        if vanished(candidate):
            return _VANISHED
    if first_error is not None:
        raise CheckpointError(
            f"no checkpoint of key {key!r} verifies; the newest failed with: {first_error.message}"
        ) from first_error
    return None


def store_for_uri(uri: str) -> CheckpointStore:
    """The store a CheckpointPolicy.store URI names: a path, or ``scheme://...`` from a plugin.

    Schemes come from the ``interlock.checkpoint_stores`` entry points (``s3`` ships with
    interlock[s3]); each names a class with ``from_uri(uri)``. Core never imports a plugin.
    """
    scheme, sep, _ = uri.partition("://")
    if not sep:
        from interlock.core.checkpoint.local import LocalCheckpointStore

        return LocalCheckpointStore(uri)
    from interlock.core.base import plugins

    store: CheckpointStore = plugins.load(plugins.CHECKPOINT_STORES, scheme).from_uri(uri)
    return store
