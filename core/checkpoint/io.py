"""Checkpoint I/O at disk speed: the per-file digest, and streams that check a file against
its manifest while they move it.

- :class:`Hasher`: a file's digest, computed once as its bytes go by (written or read).
  The algorithm is recorded with the digest (``"xxh3_128:<hex>"``, see ``DIGESTS``).
- :class:`VerifyingReader`: a file of a committed checkpoint, opened for reading. Every
  byte handed out is hashed on the way (once), and the read that would return the file's
  final bytes checks size and digest first: on a mismatch it raises
  :class:`CheckpointError` instead of returning them. So a consumer that reads to the end
  (``torch.load``, ``shutil.copyfileobj``) never finishes on corrupt data.
- :class:`HashingWriter`: a new checkpoint file opened for writing; hashes what is written.

Why xxh3_128 and not sha256: the digest guards against torn, truncated and corrupted
files (a killed writer, a bad disk, a bit flip in transit), as S3's CRC32/CRC64, GCS's
crc32c and Btrfs's crc32c do. It does not guard against someone who can write the store:
they can rewrite the manifest as well. xxh3_128 hashes about 11-13 GB/s here, faster than
a page-cache read, so it is hashed in line with each read or write (a few percent of a
write + fsync, about a fifth of a page-cache read); sha256 (1.1-1.35 GB/s) cost more than
the read itself and needed a worker thread to hide it behind a write. ``sha256`` stays available (``LocalCheckpointStore(root, digest="sha256")``)
and is what manifests of format version 1 recorded.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from interlock.core.base.errors import CheckpointError

if TYPE_CHECKING:
    from interlock.core.checkpoint.manifest import CheckpointInfo, FileEntry

__all__ = [
    "DEFAULT_DIGEST",
    "DIGESTS",
    "HASH_SLICE",
    "IO_CHUNK",
    "Hasher",
    "HashingWriter",
    "VerifyingReader",
    "check_digest",
    "check_digest_algorithm",
]

IO_CHUNK = 8 << 20  # large enough that the per-call cost vanishes, small enough to stay cached
# readinto reads and hashes this much at a time: hashed right after it lands, a slice is still
# in the core's L2 (xxh3_128 hashes ~60 GB/s from L2 here, ~27 GB/s from L3 or memory).
HASH_SLICE = 1 << 20

DEFAULT_DIGEST = "xxh3_128"
# Algorithm -> length of its hex digest. A manifest's per-file digest is "<name>:<hex>".
DIGESTS: dict[str, int] = {"xxh3_128": 32, "sha256": 64}
_HEX = re.compile(r"[0-9a-f]+")


def check_digest_algorithm(algorithm: str) -> str:
    if algorithm not in DIGESTS:
        raise CheckpointError(
            f"unknown checkpoint digest {algorithm!r}; known: {', '.join(DIGESTS)}",
            hint=f'use "{DEFAULT_DIGEST}" (the default) or "sha256" (cryptographic, about 10x slower)',
        )
    return algorithm


def check_digest(text: str) -> str:
    """``text`` if it is a digest of a known algorithm (``"xxh3_128:<32 hex>"``); else ValueError."""
    algorithm, sep, hexdigest = text.partition(":") if isinstance(text, str) else ("", "", "")
    if not sep or DIGESTS.get(algorithm) != len(hexdigest) or not _HEX.fullmatch(hexdigest):
        known = ", ".join(f"{a}:<{n} hex digits>" for a, n in DIGESTS.items())
        raise ValueError(f"bad digest {text!r} (expected one of {known})")
    return text


def _new_hash(algorithm: str) -> Any:
    if algorithm == "xxh3_128":
        import xxhash  # here: a run that saves no checkpoint runs without it (tests/test_packaging.py)

        return xxhash.xxh3_128()
    return hashlib.new(check_digest_algorithm(algorithm))


class Hasher:
    """The digest of one file's bytes, fed in order; ``digest()`` is ``"<algorithm>:<hex>"``."""

    __slots__ = ("_h", "algorithm", "size")

    def __init__(self, algorithm: str = DEFAULT_DIGEST) -> None:
        self.algorithm = algorithm
        self._h = _new_hash(algorithm)
        self.size = 0

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._h.update(data)
        self.size += len(data) if isinstance(data, bytes) else memoryview(data).nbytes

    def digest(self) -> str:
        return f"{self.algorithm}:{self._h.hexdigest()}"


def digest_of(algorithm: str, data: bytes | bytearray | memoryview) -> str:
    h = Hasher(algorithm)
    h.update(data)
    return h.digest()


def mismatch(info: CheckpointInfo, name: str, detail: str) -> CheckpointError:
    from interlock.core.checkpoint.manifest import mismatch_error

    return mismatch_error(info, name, detail)


def digest_detail(entry: FileEntry, got: str) -> str:
    """What differed, for a mismatch error: ``xxh3_128 expected <hex>, got <hex>``."""
    algorithm, _, expected = entry.digest.partition(":")
    return f"{algorithm} expected {expected}, got {got.partition(':')[2]}"


class VerifyingReader(io.RawIOBase):
    """A checkpoint file opened for reading; raises before handing out its final bytes if
    they do not match the manifest.

    Sequential reads hash each byte once, as it is handed out. When the underlying file is
    seekable (a local store, a spooled copy), so is this reader: a read past what has been
    hashed so far first hashes the gap, and a read that reaches the end of the file
    verifies the whole file before it returns. ``torch.load`` reads a zip's directory at
    the end first, so its first read verifies the whole file; later re-reads of verified
    bytes come from the same open file and are not hashed again (interlock never rewrites
    a committed checkpoint).
    """

    def __init__(
        self,
        raw: Any,
        info: CheckpointInfo,
        name: str,
        entry: FileEntry,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self._raw = raw
        self._info = info
        self.name_in_checkpoint = name
        self._entry = entry
        self._on_close = on_close
        self._h = Hasher(entry.algorithm)
        self._pos = 0  # the consumer's position
        self._raw_pos = 0  # the underlying file's position
        self.verified = False
        seekable = getattr(raw, "seekable", None)
        self._seekable = bool(seekable and seekable())

    @property
    def size(self) -> int:
        return self._entry.size

    @property
    def _hashed(self) -> int:  # bytes [0, _hashed) are in the hash
        return self._h.size

    # --- io.RawIOBase ---

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._seekable

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            target = offset
        elif whence == os.SEEK_CUR:
            target = self._pos + offset
        elif whence == os.SEEK_END:
            target = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if target < 0:
            raise ValueError(f"negative seek position {target}")
        if target != self._pos and not self._seekable:
            raise io.UnsupportedOperation(
                "this checkpoint stream reads front to back only (it comes from an object "
                "store); open it with LoadedCheckpoint.open(name, seekable=True) to seek"
            )
        self._pos = target
        return target

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer`` (reused by the caller) without an intermediate copy, hashing
        each slice right after it lands (``HASH_SLICE``, while it is in the CPU's cache).

        The same check as ``read``: the call that reaches the end verifies the file first;
        on a mismatch it overwrites what it wrote into ``buffer`` with zeros and raises, so
        the final bytes of a corrupt file are never left there as if valid.
        """
        self._check_open()
        with memoryview(buffer) as outer, outer.cast("B") as view:
            end = min(self._pos + view.nbytes, self.size)
            if self._pos >= self.size or view.nbytes == 0:
                if not self.verified and self._pos >= self.size:
                    self._extend(self.size)
                return 0
            n = end - self._pos
            if self.verified or end <= self._hashed:
                got = self._raw_readinto(self._pos, view[:n], None)
                self._pos += got
                return got
            if self._pos != self._hashed:  # seeked past what is hashed: hash the gap first
                self._extend(end)
                got = self._raw_readinto(self._pos, view[:n], None)
                self._pos += got
                return got
            got = self._raw_readinto(self._pos, view[:n], self._h)
            if got < n:
                view[:got] = bytes(got)
                raise self._short(self._pos + got)
            self._pos = end
            if end == self.size:
                try:
                    self._finish()
                except CheckpointError:
                    view[:n] = bytes(n)  # leave nothing of a corrupt file's end behind
                    raise
            return n

    def readall(self) -> bytes:
        return self.read(-1)

    def read(self, size: int | None = -1) -> bytes:
        self._check_open()
        end = self.size if size is None or size < 0 else min(self._pos + size, self.size)
        if self._pos >= self.size:
            if not self.verified:
                self._extend(self.size)
            return b""
        if self.verified or end <= self._hashed:
            return self._serve(end)
        if self._pos == self._hashed:  # front to back: read once, hash what is handed out
            data = self._raw_read(self._pos, end - self._pos)
            if len(data) < end - self._pos:
                raise self._short(self._pos + len(data))
            self._h.update(data)
            self._pos = end
            if end == self.size:
                self._finish()  # raises before the final bytes are returned
            return data
        self._extend(end)  # seeked past what is hashed: hash the gap (and the range) first
        return self._serve(end)

    def close(self) -> None:
        if not self.closed:
            try:
                close = getattr(self._raw, "close", None)
                if close:
                    close()
            finally:
                if self._on_close is not None:
                    self._on_close()
                super().close()

    # --- internals ---

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on a closed checkpoint file")

    def _raw_read(self, pos: int, n: int) -> bytes:
        """Up to ``n`` bytes at ``pos`` (fewer only at the end of the file)."""
        if pos != self._raw_pos:
            if not self._seekable:
                raise io.UnsupportedOperation("this checkpoint stream reads front to back only")
            self._raw.seek(pos)
            self._raw_pos = pos
        parts, want = [], n
        try:
            while want > 0:
                chunk = self._raw.read(want)
                if not chunk:
                    break
                parts.append(chunk)
                want -= len(chunk)
        except OSError as exc:
            raise CheckpointError(
                f"checkpoint {self._info.id} of key {self._info.key!r}: cannot read file "
                f"{self.name_in_checkpoint!r}: {exc}"
            ) from exc
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        self._raw_pos += len(data)
        return data

    def _raw_readinto(self, pos: int, view: memoryview, hasher: Hasher | None) -> int:
        """Fill ``view`` from ``pos`` (less only at the end of the file); with ``hasher``,
        hash each ``HASH_SLICE`` as soon as it is read."""
        if pos != self._raw_pos:
            if not self._seekable:
                raise io.UnsupportedOperation("this checkpoint stream reads front to back only")
            self._raw.seek(pos)
            self._raw_pos = pos
        readinto = getattr(self._raw, "readinto", None)
        got, total = 0, view.nbytes
        try:
            while got < total:
                part = view[got : min(got + HASH_SLICE, total)]
                if readinto is not None:
                    n = readinto(part)
                else:  # a stream without readinto (some object-store bodies)
                    data = self._raw.read(part.nbytes)
                    n = len(data)
                    part[:n] = data
                if not n:
                    break
                if hasher is not None:
                    hasher.update(part[:n] if n < part.nbytes else part)
                got += n
        except OSError as exc:
            raise CheckpointError(
                f"checkpoint {self._info.id} of key {self._info.key!r}: cannot read file "
                f"{self.name_in_checkpoint!r}: {exc}"
            ) from exc
        self._raw_pos += got
        return got

    def _serve(self, end: int) -> bytes:
        data = self._raw_read(self._pos, end - self._pos)
        self._pos += len(data)
        return data

    def _extend(self, upto: int) -> None:
        """Hash bytes [_hashed, upto) from the underlying file; verify at the end.

        Nothing is handed out here (``torch.load`` seeks to the end first: this pass checks
        the whole file), so it reads into one small scratch buffer, hashed while in L2."""
        if self._hashed < upto:
            scratch = memoryview(bytearray(min(HASH_SLICE, upto - self._hashed)))
            while self._hashed < upto:
                want = min(scratch.nbytes, upto - self._hashed)
                if not self._raw_readinto(self._hashed, scratch[:want], self._h):
                    raise self._short(self._hashed)
        if self._hashed == self.size and not self.verified:
            self._finish()

    def _short(self, got: int) -> CheckpointError:
        return mismatch(self._info, self.name_in_checkpoint, f"size expected {self.size}, got {got}")

    def _finish(self) -> None:
        extra = self._raw_read(self.size, 1)
        if extra:
            raise mismatch(self._info, self.name_in_checkpoint, f"longer than {self.size} bytes")
        digest = self._h.digest()
        if digest != self._entry.digest:
            raise mismatch(self._info, self.name_in_checkpoint, digest_detail(self._entry, digest))
        self.verified = True


class HashingWriter(io.RawIOBase):
    """A new checkpoint file opened for writing: hashes and counts what is written.
    ``torch.save(state, f)`` writes to it as to a file; it does not seek (the hash follows
    the bytes in order). ``close`` flushes the file and hands it, still open, to
    ``on_close(writer, file)``, which owns it from then on (the local store fsyncs it with
    the rest of the checkpoint at the commit, then closes it).

    Each write is hashed before it returns, so the caller may reuse its buffer at once
    (``torch.save`` does). xxh3 costs a few percent of the write; no worker thread needed.
    """

    def __init__(
        self,
        out: BinaryIO,
        on_close: Callable[[HashingWriter, BinaryIO], None],
        algorithm: str = DEFAULT_DIGEST,
    ) -> None:
        super().__init__()
        self._out = out
        self._on_close = on_close
        self._h = Hasher(algorithm)
        self.failed = False

    @property
    def size(self) -> int:
        return self._h.size

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._h.size

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("write to a closed checkpoint file")
        view = memoryview(data).cast("B")
        try:
            self._out.write(view)
        except BaseException:
            self.failed = True
            raise
        self._h.update(view)  # after the write: the bytes are still in the CPU's cache
        return view.nbytes

    def digest(self) -> str:
        return self._h.digest()

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._out.flush()
        except BaseException:
            self.failed = True
            raise
        finally:
            super().close()
            self._on_close(self, self._out)
