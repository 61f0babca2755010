"""Checkpoints: the store protocol, the manifest format and ``Checkpointer`` (``ctx.checkpoint``).

A checkpoint is a set of named files under a *key* (stable across the retries of one run,
e.g. ``"fraud-retrain/run-42/train"``), committed by a JSON manifest that records every
file's digest and size. Stores write the data first, make it durable, and commit the
manifest last, so a reader sees either a whole checkpoint or none. Anything without a
valid manifest is not a checkpoint.

Corruption policy: a committed checkpoint whose files do not match its manifest (or whose
manifest fails its own checksum) is *refused* with :class:`CheckpointError` naming the key,
the checkpoint id and the file. ``load_latest(..., fallback=True)`` opts in to skipping
corrupt checkpoints (with a warning) in favour of the newest one that verifies. Returning
bad data silently, or silently rolling back, is never the default.

Pickle is never used: states are raw bytes, JSON, or files.

Writing a store (the S3 one, say): pick the next id (``format_checkpoint_id``) above every
id present, committed or not; validate names with ``validate_key``/``validate_file_names``;
upload the files; then write ``encode_manifest(info)`` as one object, last. ``list`` and
``load_latest`` read manifests with ``decode_manifest`` (which checks the manifest's own
checksum and its key and id), skip ids that have no manifest, and return a
``LoadedCheckpoint(info, opener, verified=True)`` after ``verify()`` (with
``verify=False``: after checking each file's presence and size only, ``verified=False``);
``load_latest`` is ``newest_that_verifies`` over the store's listing. Run
tests/checkpoints/contract.py.

Speed: every read hashes what it reads once (``checkpoint_io``), so ``Checkpointer.load``
asks for ``verify=False`` and lets the reads check: one pass over the data, one buffer.

Manifest format, version 2 (written since interlock hashed with xxh3_128)::

    {"format": "interlock.checkpoint", "version": 2, "key": ..., "id": ..., "step": ...,
     "created_at": ..., "metadata": {...},
     "files": {"<name>": {"digest": "xxh3_128:<32 hex>", "size": <bytes>}, ...},
     "manifest_sha256": "<sha256 of the canonical JSON of everything else>"}

A file's digest names its algorithm (``checkpoint_io.DIGESTS``: ``xxh3_128``, the
default, or ``sha256``). Version 1 manifests (``{"sha256": "<64 hex>", "size": ...}`` per
file) still load and verify: they read as ``FileEntry("sha256:<hex>", size)``.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import inspect
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol, TypeVar, runtime_checkable

from interlock.core.base.errors import CheckpointError, SerializationError
from interlock.core.base.scratch import make_temp_dir
from interlock.core.checkpoint.io import check_digest, digest_detail, digest_of

__all__ = [
    "CHECKPOINT_ID_WIDTH",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "CheckpointInfo",
    "CheckpointStore",
    "CheckpointWriter",
    "Checkpointer",
    "FileEntry",
    "FileSource",
    "LoadedCheckpoint",
    "decode_manifest",
    "encode_manifest",
    "check_metadata",
    "format_checkpoint_id",
    "mismatch_error",
    "newest_that_verifies",
    "open_inside",
    "parse_checkpoint_id",
    "path_inside",
    "validate_file_name",
    "validate_file_names",
    "validate_key",
    "wait_for_prunes",
]

log = logging.getLogger("interlock.checkpoint")

MANIFEST_FORMAT = "interlock.checkpoint"
MANIFEST_VERSION = 2  # what encode_manifest writes; decode_manifest reads 1 and 2
_READABLE_VERSIONS = (1, 2)
CHECKPOINT_ID_WIDTH = 12  # zero-padded so that ids sort as strings and as numbers alike
CHUNK = 1 << 20  # kept for stores written against it; reads and writes use checkpoint_io.IO_CHUNK

# A file's content: bytes in memory, or a path to a regular file that is streamed (never a
# plain ``str``: it is ambiguous between content and path).
FileSource = bytes | bytearray | memoryview | os.PathLike

_ID_RE = re.compile(rf"^[0-9]{{{CHECKPOINT_ID_WIDTH}}}$")
_RESERVED_META = "interlock."


@dataclass(frozen=True)
class FileEntry:
    """One file of a checkpoint as its manifest records it.

    ``digest`` is ``"<algorithm>:<hex>"``: ``"xxh3_128:..."`` as interlock writes it,
    ``"sha256:..."`` for a store opted in to sha256 or a manifest of format version 1.
    """

    digest: str
    size: int

    @property
    def algorithm(self) -> str:
        return self.digest.partition(":")[0]


@dataclass(frozen=True)
class CheckpointInfo:
    """One committed checkpoint, as its manifest describes it."""

    key: str
    id: str  # monotonic per key, zero-padded: sorts as text
    step: int | None
    created_at: float  # seconds since the epoch
    files: dict[str, FileEntry] = field(hash=False)
    metadata: dict[str, Any] = field(hash=False)

    @property
    def sequence(self) -> int:
        return int(self.id)

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.files.values())


# --- ids, keys, names ------------------------------------------------------------------


def format_checkpoint_id(sequence: int) -> str:
    if sequence < 1 or sequence >= 10**CHECKPOINT_ID_WIDTH:
        raise ValueError(f"checkpoint sequence out of range: {sequence}")
    return f"{sequence:0{CHECKPOINT_ID_WIDTH}d}"


def parse_checkpoint_id(text: str) -> int | None:
    """The sequence number of a checkpoint id, or None when ``text`` is not one."""
    return int(text) if _ID_RE.match(text) and int(text) > 0 else None


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def validate_key(key: str) -> str:
    """A key is ``/``-separated segments: none empty, ``.`` or ``..``; no control chars."""
    if not isinstance(key, str) or not key:
        raise CheckpointError(f"checkpoint key must be a non-empty string, got {key!r}")
    if len(key) > 512 or _has_control(key) or "\\" in key:
        raise CheckpointError(
            f"invalid checkpoint key {key!r}: at most 512 chars, no control chars or backslashes"
        )
    if any(seg in ("", ".", "..") for seg in key.split("/")):
        raise CheckpointError(
            f"invalid checkpoint key {key!r}: segments between '/' must be non-empty and not '.' or '..'",
            hint='use a key such as "pipeline/run_id/step"',
        )
    return key


def validate_file_name(name: str) -> str:
    """A relative POSIX path inside the checkpoint; no ``..``, no absolute paths."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"checkpoint file name must be a non-empty string, got {name!r}")
    if _has_control(name) or "\\" in name or name.startswith("/"):
        raise CheckpointError(
            f"invalid checkpoint file name {name!r}: must be a relative POSIX path"
        )
    parts = name.split("/")
    if any(p in ("", ".", "..") or len(p.encode()) > 255 for p in parts):
        raise CheckpointError(
            f"invalid checkpoint file name {name!r}: no empty, '.', '..' or over-long segments"
        )
    return name


def path_inside(root: str | os.PathLike, name: str) -> Path:
    """Where checkpoint file ``name`` lives under ``root``; refuses a name that would escape it.

    Every store and every restore goes through here: an absolute name, a ``..`` segment or a
    path through a symlink (a forged manifest, a tampered directory) is a CheckpointError,
    never a read or a write outside ``root``.
    """
    validate_file_name(name)
    base = Path(root)
    path = base
    for part in name.split("/"):
        path = path / part
        if path.is_symlink():
            raise CheckpointError(
                f"checkpoint file {name!r} resolves through a symlink ({path}); refusing to follow it",
                hint="a checkpoint holds regular files only; the store has been tampered with",
            )
    return path


def open_inside(root: str | os.PathLike, name: str) -> BinaryIO:
    """Open checkpoint file ``name`` under ``root`` for reading, never through a symlink."""
    path = path_inside(root, name)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CheckpointError(f"checkpoint file {name!r} is a symlink; refusing to follow it") from exc
        raise
    return os.fdopen(fd, "rb")


def validate_file_names(names: list[str]) -> None:
    for n in names:
        validate_file_name(n)
    # "a" and "a/b" cannot both be files: one would have to be a directory.
    dirs = {str(p) for n in names for p in PurePosixPath(n).parents if str(p) != "."}
    clash = sorted(dirs.intersection(names))
    if clash:
        raise CheckpointError(f"checkpoint file name {clash[0]!r} is also used as a directory")


def check_save_args(
    key: str, files: Mapping[str, Any], step: int | None, metadata: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What every store checks before it writes a byte; returns the metadata as JSON."""
    validate_file_names(list(files))
    if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
        raise CheckpointError(f"checkpoint step must be an int or None, got {step!r}")
    meta = check_metadata(metadata or {}, key)
    for name, src in files.items():
        if isinstance(src, str) or not isinstance(src, bytes | bytearray | memoryview | os.PathLike):
            raise SerializationError(
                f"checkpoint file {name!r}: expected bytes or a path-like, got {type(src).__name__}",
                hint="wrap a path in pathlib.Path; a str is ambiguous",
            )
    return meta


def check_metadata(metadata: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A JSON copy of ``metadata`` (string keys throughout), equal to what a load returns."""

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise SerializationError(
                        f"checkpoint metadata for key {key!r}: {where} has a non-string key {k!r}"
                    )
                walk(v, f"{where}.{k}")
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")
        elif not (value is None or isinstance(value, str | int | float | bool)):
            raise SerializationError(
                f"checkpoint metadata for key {key!r}: {where} has type {type(value).__name__}, not JSON-able"
            )

    meta = dict(metadata)
    walk(meta, "metadata")
    return json.loads(json.dumps(meta))  # tuples become lists now, not only after a load


# --- manifest --------------------------------------------------------------------------


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def encode_manifest(info: CheckpointInfo) -> bytes:
    """The manifest bytes for ``info``; carries its own checksum so that a flip is caught."""
    for name, entry in info.files.items():
        try:
            check_digest(entry.digest)
        except ValueError as exc:  # a store's bug: refuse to commit what no load could verify
            raise CheckpointError(f"checkpoint of key {info.key!r}: file {name!r}: {exc}") from exc
    body = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "key": info.key,
        "id": info.id,
        "step": info.step,
        "created_at": info.created_at,
        "files": {n: {"digest": e.digest, "size": e.size} for n, e in sorted(info.files.items())},
        "metadata": info.metadata,
    }
    try:
        digest = hashlib.sha256(_canonical(body)).hexdigest()
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"checkpoint metadata for key {info.key!r} is not JSON-able: {exc}"
        ) from exc
    return json.dumps({**body, "manifest_sha256": digest}, sort_keys=True, indent=1).encode()


def decode_manifest(data: bytes, *, key: str, checkpoint_id: str) -> CheckpointInfo:
    """Parse and check a manifest found at (``key``, ``checkpoint_id``).

    Raises CheckpointError when it is not valid JSON, fails its own checksum, or describes
    another location: a present manifest is the commit record, so a bad one is corruption.
    """
    where = f"checkpoint {checkpoint_id} of key {key!r}"
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        claimed = doc.pop("manifest_sha256")
        actual = hashlib.sha256(_canonical(doc)).hexdigest()
        if claimed != actual:
            raise ValueError(f"manifest checksum mismatch (expected {claimed}, got {actual})")
        version = doc["version"]
        if doc["format"] != MANIFEST_FORMAT or type(version) is not int or version not in _READABLE_VERSIONS:
            raise ValueError(
                f"unknown format {doc['format']!r} version {version!r} (this interlock reads "
                f"{MANIFEST_FORMAT!r} versions {', '.join(map(str, _READABLE_VERSIONS))}; "
                "a newer interlock may have written it)"
            )
        if doc["key"] != key or doc["id"] != checkpoint_id:
            raise ValueError(f"manifest names key {doc['key']!r} id {doc['id']!r}")
        step = doc["step"]
        if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
            raise ValueError(f"bad step {step!r}")
        files = {}
        for name, entry in doc["files"].items():
            validate_file_name(name)
            size = entry["size"]
            if not (isinstance(size, int) and not isinstance(size, bool) and size >= 0):
                raise ValueError(f"bad size for file {name!r}: {size!r}")
            # Version 1 recorded a bare sha256; version 2 names the algorithm.
            digest = f"sha256:{entry['sha256']}" if version == 1 else entry["digest"]
            try:
                check_digest(digest)
            except ValueError as exc:
                raise ValueError(f"file {name!r}: {exc}") from None
            files[name] = FileEntry(digest=digest, size=size)
        if not isinstance(doc["metadata"], dict):
            raise ValueError("metadata is not an object")
        return CheckpointInfo(
            key=key,
            id=checkpoint_id,
            step=step,
            created_at=float(doc["created_at"]),
            files=files,
            metadata=doc["metadata"],
        )
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: invalid manifest: {exc.message}") from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(
            f"{where}: invalid manifest: {exc}",
            hint="the manifest is corrupt; delete this checkpoint or load with fallback=True",
        ) from exc


def mismatch_error(info: CheckpointInfo, name: str, detail: str) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {info.id} of key {info.key!r}: file {name!r} does not match its manifest ({detail})",
        hint="the checkpoint is corrupt; delete it, or load with fallback=True to use the "
        "newest checkpoint that verifies",
    )


# --- loading ---------------------------------------------------------------------------


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
            return reader  # type: ignore[return-value]
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
        return spool  # type: ignore[return-value]

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


# --- the store protocol ----------------------------------------------------------------


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


# --- the scan every store's load_latest shares -------------------------------------------

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
        reserved = [k for k in meta if k.startswith(_RESERVED_META)]
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
        info = self.store.save(self.key, files, step=step, metadata=meta)
        self.committed(info)
        return info

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
        if _takes_verify(self.store):
            return self.store.load_latest(self.key, fallback=self.fallback, verify=False)
        return self.store.load_latest(self.key, fallback=self.fallback)

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


def _takes_verify(store: CheckpointStore) -> bool:
    """Whether ``store.load_latest`` has the ``verify`` keyword (stores written before it
    was added do not; they verify on load, and reads verify again)."""
    kind = type(store)
    known = _VERIFY_KW.get(kind)
    if known is None:
        try:
            known = "verify" in inspect.signature(store.load_latest).parameters
        except (TypeError, ValueError):
            known = False
        _VERIFY_KW[kind] = known
    return known


_VERIFY_KW: dict[type, bool] = {}


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
