"""Streams between local sources and S3: hashing what is uploaded, wrapping what is read."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from typing import Any, BinaryIO

from interlock.core.base.errors import CheckpointError, SerializationError
from interlock.core.checkpoint.io import DEFAULT_DIGEST, Hasher
from interlock.core.checkpoint.manifest import FileEntry, FileSource

from .errors import S3StoreError, is_boto_error


class HashingReader:
    """A read-only, non-seekable view of a source that hashes what it hands out.

    Non-seekable on purpose: s3transfer then reads it once, in order, and retries from its
    own buffers, so the digest covers exactly the bytes that were uploaded. Each part is
    hashed as it is read (xxh3: a few percent of reading it).
    """

    def __init__(self, source: BinaryIO, algorithm: str = DEFAULT_DIGEST) -> None:
        self._source = source
        self.hash = Hasher(algorithm)

    @property
    def size(self) -> int:
        return self.hash.size

    def entry(self) -> FileEntry:
        """What the manifest records for the bytes read so far (all of them, once uploaded)."""
        return FileEntry(digest=self.hash.digest(), size=self.hash.size)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, amount: int | None = -1) -> bytes:
        if amount is None or amount < 0:
            data = self._source.read()
        else:
            parts, want = [], amount
            while want > 0:  # full reads: a short part would be below S3's minimum part size
                chunk = self._source.read(want)
                if not chunk:
                    break
                parts.append(chunk)
                want -= len(chunk)
            data = b"".join(parts)
        self.hash.update(data)
        return data


class InMemory:
    """What a HashingReader reports (``entry()``) for bytes uploaded as they are. A bytes
    object is immutable, so its digest is what was sent."""

    def __init__(self, data: bytes, algorithm: str = DEFAULT_DIGEST) -> None:
        self.hash = Hasher(algorithm)
        self.hash.update(data)

    @property
    def size(self) -> int:
        return self.hash.size

    def entry(self) -> FileEntry:
        return FileEntry(digest=self.hash.digest(), size=self.hash.size)


class Body:
    """A boto3 StreamingBody whose transport errors surface as S3StoreError."""

    def __init__(self, body: Any, on_error: Callable[[BaseException], S3StoreError]) -> None:
        self._body = body
        self._on_error = on_error

    def read(self, amount: int = -1) -> bytes:
        try:
            return self._body.read(amount if amount >= 0 else None)
        except Exception as exc:
            if is_boto_error(exc):
                raise self._on_error(exc) from exc
            raise

    def close(self) -> None:
        self._body.close()


def open_source(key: str, name: str, source: FileSource) -> BinaryIO:
    if isinstance(source, bytes | bytearray | memoryview):
        # bytes(...) is free for bytes and a snapshot of a bytearray or memoryview.
        return io.BytesIO(bytes(source))
    try:
        return open(source, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise CheckpointError(
            f"cannot save a checkpoint of key {key!r}: cannot read file {name!r} from {os.fspath(source)}: {exc}"
        ) from exc


def check_regular_file(key: str, name: str, source: os.PathLike) -> None:
    try:
        mode = os.stat(source).st_mode
    except OSError as exc:
        raise CheckpointError(
            f"cannot save a checkpoint of key {key!r}: file {name!r} from {os.fspath(source)}: {exc}"
        ) from exc
    if not stat.S_ISREG(mode):  # checked before opening: opening a FIFO would block
        raise SerializationError(f"cannot checkpoint {os.fspath(source)}: not a regular file")

