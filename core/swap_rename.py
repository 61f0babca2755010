"""Replace a file by swapping names with a new one (``renameat2(RENAME_EXCHANGE)``), where the
kernel and the file system allow it; else ``os.replace``.

Why: ext4 (its default ``auto_da_alloc``) makes a rename *over an existing file* allocate
and start writing the new file's blocks first, so that a machine crash leaves the old file
or the new one, never an empty one. That costs 20-150 us a rename here, and the shim renames
a step's receipt fragment over its "started" record on every step (issue 12, item 2). A
swap is just as atomic for readers and for a killed process (the name always holds a
complete file, old or new), without the flush: after a *machine* crash the fragment may be
empty, which readers take for an absent fragment (``RunState._read``). Used for receipt
fragments only, whose promise is to survive the process, not the machine; the run's other
state files (receipt, markers, parameters) keep ``os.replace``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_renameat2: Any = None  # the libc function once looked up; False where there is none


def _lookup() -> Any:
    global _renameat2
    if _renameat2 is None:
        # Only once ctypes is loaded (flytekit loads it): importing it costs 1.5-1.8 ms, the
        # price of 10-75 swaps, more than a task process that writes one fragment saves.
        if "ctypes" not in sys.modules:
            return False
        _renameat2 = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28, musl >= 1.2.?
                fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
                fn.restype = ctypes.c_int
                _renameat2 = fn
            except (OSError, AttributeError):
                _renameat2 = False
    return _renameat2


def swap_into(tmp: str, path: str) -> None:
    """Put the file at ``tmp`` at ``path``, atomically; ``tmp`` is gone afterwards.

    With ``path`` present and the swap supported: the names are exchanged, then the old file
    (now at ``tmp``) is removed; a process killed in between leaves that old copy at ``tmp``
    (a temporary name no reader looks at). Otherwise ``os.replace``."""
    fn = _lookup()
    if fn:
        if fn(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(path), _RENAME_EXCHANGE) == 0:
            os.unlink(tmp)
            return
        # ENOENT: nothing at `path` yet (a plain rename has nothing to flush); EINVAL,
        # ENOSYS, EOPNOTSUPP...: a file system or kernel without the swap.
    os.replace(tmp, path)
