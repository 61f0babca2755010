"""Checkpoints: the store protocol, the manifest format and ``Checkpointer`` (``ctx.checkpoint``).

A checkpoint is a set of named files under a *key* (stable across the retries of one run,
e.g. ``"fraud-retrain/run-42/train"``), committed by a JSON manifest that records every
file's sha256 and size. Stores write the data first, make it durable, and commit the
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
``LoadedCheckpoint(info, opener)`` after ``verify()``; ``load_latest`` is
``newest_that_verifies`` over the store's listing. Run tests/checkpoints/contract.py.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol, TypeVar, runtime_checkable

from .errors import CheckpointError, SerializationError
from .scratch import make_temp_dir

__all__ = [
    "CHECKPOINT_ID_WIDTH",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "CheckpointInfo",
    "CheckpointStore",
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
]

log = logging.getLogger("interlock.checkpoint")

MANIFEST_FORMAT = "interlock.checkpoint"
MANIFEST_VERSION = 1
CHECKPOINT_ID_WIDTH = 12  # zero-padded so that ids sort as strings and as numbers alike
CHUNK = 1 << 20

# A file's content: bytes in memory, or a path to a regular file that is streamed (never a
# plain ``str``: it is ambiguous between content and path).
FileSource = bytes | bytearray | memoryview | os.PathLike

_ID_RE = re.compile(rf"^[0-9]{{{CHECKPOINT_ID_WIDTH}}}$")
_RESERVED_META = "interlock."


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    size: int


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
    body = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "key": info.key,
        "id": info.id,
        "step": info.step,
        "created_at": info.created_at,
        "files": {n: {"sha256": e.sha256, "size": e.size} for n, e in sorted(info.files.items())},
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
        if doc["format"] != MANIFEST_FORMAT or doc["version"] != MANIFEST_VERSION:
            raise ValueError(f"unknown format {doc['format']!r} version {doc['version']!r}")
        if doc["key"] != key or doc["id"] != checkpoint_id:
            raise ValueError(f"manifest names key {doc['key']!r} id {doc['id']!r}")
        step = doc["step"]
        if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
            raise ValueError(f"bad step {step!r}")
        files = {}
        for name, entry in doc["files"].items():
            validate_file_name(name)
            sha, size = entry["sha256"], entry["size"]
            if not (
                isinstance(sha, str) and len(sha) == 64 and isinstance(size, int) and size >= 0
            ):
                raise ValueError(f"bad entry for file {name!r}")
            files[name] = FileEntry(sha256=sha, size=size)
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
    """A committed checkpoint whose files were verified when it was loaded.

    Reads verify again (sha256 and size, while streaming), so the bytes handed out are
    always the bytes the manifest committed. ``opener(name)`` opens a file for reading;
    stores supply it and it must return a binary file object usable in ``with`` (wrap a
    boto3 ``StreamingBody`` in ``contextlib.closing``).
    """

    def __init__(
        self, info: CheckpointInfo, opener: Callable[[str], AbstractContextManager[BinaryIO]]
    ) -> None:
        self.info = info
        self._opener = opener

    def __repr__(self) -> str:
        return (
            f"LoadedCheckpoint(key={self.info.key!r}, id={self.info.id!r}, step={self.info.step!r})"
        )

    @property
    def names(self) -> list[str]:
        return sorted(self.info.files)

    def _chunks(self, name: str) -> Iterator[bytes]:
        entry = self.info.files.get(name)
        if entry is None:
            raise CheckpointError(
                f"checkpoint {self.info.id} of key {self.info.key!r} has no file {name!r}"
            )
        h, size = hashlib.sha256(), 0
        try:
            with self._opener(name) as f:
                while chunk := f.read(CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    if size > entry.size:
                        raise mismatch_error(self.info, name, f"longer than {entry.size} bytes")
                    yield chunk
        except OSError as exc:
            raise CheckpointError(
                f"checkpoint {self.info.id} of key {self.info.key!r}: cannot read file {name!r}: {exc}"
            ) from exc
        if size != entry.size:
            raise mismatch_error(self.info, name, f"size expected {entry.size}, got {size}")
        if h.hexdigest() != entry.sha256:
            raise mismatch_error(
                self.info, name, f"sha256 expected {entry.sha256}, got {h.hexdigest()}"
            )

    def verify(self) -> None:
        """Read every file and check it against the manifest; raise CheckpointError if not."""
        for name in self.names:
            for _ in self._chunks(name):
                pass

    def read_bytes(self, name: str) -> bytes:
        return b"".join(self._chunks(name))

    def copy_to(self, dest: str | os.PathLike) -> Path:
        """Write every file under ``dest`` (created if missing); returns ``dest``."""
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

    def load_latest(self, key: str, *, fallback: bool = False) -> LoadedCheckpoint | None: ...

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

    def __repr__(self) -> str:
        return f"Checkpointer(key={self.key!r}, keep={self.keep!r}, store={self.store!r})"

    def save(
        self,
        state: Any,
        *,
        step: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo:
        meta = dict(metadata or {})
        reserved = [k for k in meta if k.startswith(_RESERVED_META)]
        if reserved:
            raise CheckpointError(
                f"checkpoint metadata keys starting with 'interlock.' are reserved: {reserved}"
            )
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
        if self.keep is not None:
            try:
                self.store.prune(self.key, self.keep)
            except (OSError, CheckpointError) as exc:
                # The new checkpoint is committed; an old one left behind costs space only.
                log.warning(
                    "checkpoint %s of key %r saved, but pruning failed: %s", info.id, self.key, exc
                )
        return info

    def load(self, dest: str | os.PathLike | None = None) -> Any:
        """The latest committed state, or None. Raises CheckpointError on corruption.

        For a directory (or file) checkpoint, ``dest`` is the directory to restore into
        (created if missing, must be empty); by default a fresh temporary directory.
        """
        loaded = self.store.load_latest(self.key, fallback=self.fallback)
        if loaded is None:
            return None
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
                # The name comes from the manifest: one of its files, one segment, or refused.
                file_name = loaded.info.metadata.get(FILE_NAME_KEY)
                if not isinstance(file_name, str) or "/" in file_name or file_name not in loaded.names:
                    raise CheckpointError(
                        f"checkpoint {loaded.info.id} of key {self.key!r}: file name {file_name!r} "
                        "is not one of its files",
                        hint="the manifest was not written by Checkpointer.save (forged or damaged)",
                    )
                validate_file_name(file_name)
            target = self._restore_dir(dest)
            loaded.copy_to(target)
            if kind == "file":
                return path_inside(target, loaded.info.metadata[FILE_NAME_KEY])
            for d in loaded.info.metadata.get(EMPTY_DIRS_KEY, []):
                path_inside(target, d).mkdir(
                    parents=True, exist_ok=True
                )
            return target
        raise CheckpointError(
            f"checkpoint {loaded.info.id} of key {self.key!r} has unknown kind {kind!r}",
            hint="it was not written by Checkpointer.save; read it with store.load_latest()",
        )

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
        from .checkpoint_local import LocalCheckpointStore

        return LocalCheckpointStore(uri)
    from . import plugins

    store: CheckpointStore = plugins.load(plugins.CHECKPOINT_STORES, scheme).from_uri(uri)
    return store
