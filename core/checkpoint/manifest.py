"""The checkpoint manifest: what commits a checkpoint, and the names it may hold.

A checkpoint is a set of named files under a *key* (stable across the retries of one run,
e.g. ``"fraud-retrain/run-42/train"``), committed by a JSON manifest that records every
file's digest and size. Stores write the data first, make it durable, and commit the
manifest last, so a reader sees either a whole checkpoint or none. Anything without a
valid manifest is not a checkpoint. Ids are zero-padded sequence numbers
(``format_checkpoint_id``); keys and file names are checked here, on every store.

Manifest format, version 2 (written since interlock hashed with xxh3_128)::

    {"format": "interlock.checkpoint", "version": 2, "key": ..., "id": ..., "step": ...,
     "created_at": ..., "metadata": {...},
     "files": {"<name>": {"digest": "xxh3_128:<32 hex>", "size": <bytes>}, ...},
     "manifest_sha256": "<sha256 of the canonical JSON of everything else>"}

A file's digest names its algorithm (``io.DIGESTS``: ``xxh3_128``, the default, or
``sha256``). Version 1 manifests (``{"sha256": "<64 hex>", "size": ...}`` per file) still
load and verify: they read as ``FileEntry("sha256:<hex>", size)``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from interlock.core.base.errors import CheckpointError, SerializationError
from interlock.core.checkpoint.io import check_digest

MANIFEST_FORMAT = "interlock.checkpoint"


MANIFEST_VERSION = 2  # what encode_manifest writes; decode_manifest reads 1 and 2


_READABLE_VERSIONS = (1, 2)


CHECKPOINT_ID_WIDTH = 12  # zero-padded so that ids sort as strings and as numbers alike


_ID_RE = re.compile(rf"^[0-9]{{{CHECKPOINT_ID_WIDTH}}}$")


RESERVED_META = "interlock."


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


# A file's content: bytes in memory, or a path to a regular file that is streamed (never a
# plain ``str``: it is ambiguous between content and path).
FileSource = bytes | bytearray | memoryview | os.PathLike
