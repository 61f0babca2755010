"""SHA-256 of small inputs (a step's source, a value's canonical JSON) without ``hashlib``.

``hashlib`` loads OpenSSL's ``_hashlib`` (and ``_blake2``): about 2.5 ms, paid by every KFP
task process, which hashes a few hundred bytes (the step's code fingerprint) and nothing
else. CPython's own SHA-256 module loads in a tenth of that and gives the same digest.
Large inputs (a directory's files, a DataFrame) use ``hashlib``: OpenSSL's SHA-256 is
several times faster per byte.
"""

from __future__ import annotations

import sys
from typing import Any

try:  # CPython 3.12+ keeps its SHA-2 family in one module (a failed import costs a path search)
    if sys.version_info >= (3, 12):
        from _sha2 import sha256 as _builtin_sha256  # type: ignore[import-not-found]
    else:
        from _sha256 import sha256 as _builtin_sha256  # type: ignore[import-not-found,no-redef]
except ImportError:  # a Python built without its own hashes: OpenSSL's, loaded at first use
    _builtin_sha256 = None


def sha256(data: bytes = b"") -> Any:
    """A sha256 object (``update``, ``hexdigest``) for a small input; same digests as hashlib's."""
    if _builtin_sha256 is None:
        import hashlib

        return hashlib.sha256(data)
    return _builtin_sha256(data)
