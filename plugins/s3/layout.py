"""Where a checkpoint's objects live in the bucket.

::

    <prefix>/<key>/@ckpt/<id>/claim            a writer's claim on the id (token, pid, time)
    <prefix>/<key>/@ckpt/<id>/data/<file name> the files, written first
    <prefix>/<key>/@ckpt/<id>/manifest.json    the commit point, written last

Each segment of the key is percent-encoded on its own (``quote(seg, safe="")``), which
never yields an ``@``. So ``@ckpt`` cannot be a key segment, and every object of key K is
under ``<K>/@ckpt/`` and no object of another key is: nested keys
(``run-1`` and ``run-1/train``) and key segments that look like ids cannot collide.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from interlock.core.base.errors import CheckpointError
from interlock.core.checkpoint.manifest import validate_file_name, validate_key

MARKER = "@ckpt"
MANIFEST = "manifest.json"
CLAIM = "claim"
DATA = "data"
MAX_OBJECT_KEY_BYTES = 1024  # S3's limit on an object key, in UTF-8 bytes


def _check_length(object_key: str) -> str:
    if len(object_key.encode()) > MAX_OBJECT_KEY_BYTES:
        raise CheckpointError(
            f"S3 object key too long ({len(object_key.encode())} bytes > {MAX_OBJECT_KEY_BYTES}): "
            f"{object_key[:80]}...",
            hint="use a shorter checkpoint key, store prefix or file names",
        )
    return object_key


@dataclass(frozen=True)
class KeyLayout:
    """Object names for one checkpoint key under a store prefix."""

    prefix: str  # "" or "a/b" (no leading or trailing slash)
    key: str

    @property
    def root(self) -> str:
        """``<prefix>/<encoded key>/@ckpt/``: everything of this key, and nothing else."""
        encoded = "/".join(quote(seg, safe="") for seg in validate_key(self.key).split("/"))
        base = f"{self.prefix}/{encoded}" if self.prefix else encoded
        return _check_length(f"{base}/{MARKER}/")

    def checkpoint(self, checkpoint_id: str) -> str:
        return f"{self.root}{checkpoint_id}/"

    def manifest(self, checkpoint_id: str) -> str:
        return f"{self.checkpoint(checkpoint_id)}{MANIFEST}"

    def claim(self, checkpoint_id: str) -> str:
        return f"{self.checkpoint(checkpoint_id)}{CLAIM}"

    def data(self, checkpoint_id: str, name: str) -> str:
        # File names stay readable: they are already relative POSIX paths without "..",
        # and everything under data/ belongs to this checkpoint alone.
        return _check_length(f"{self.checkpoint(checkpoint_id)}{DATA}/{validate_file_name(name)}")


def normalise_prefix(prefix: str) -> str:
    prefix = (prefix or "").strip("/")
    if prefix and any(seg in ("", ".", "..") for seg in prefix.split("/")):
        raise CheckpointError(
            f"invalid S3 checkpoint prefix {prefix!r}: empty, '.' or '..' segments",
            hint='use a prefix such as "checkpoints/team-a"',
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in prefix):
        raise CheckpointError(f"invalid S3 checkpoint prefix {prefix!r}: control characters")
    return prefix
