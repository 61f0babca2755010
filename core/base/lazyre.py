"""A regex compiled when first used, not when its module is imported.

Every KFP task process imports the runtime shim to run one step; a pattern that only a
failure or a secret-looking value needs should not cost each of them its compile time.
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    """Stands in for ``re.compile(source, flags)``: the first attribute asked for compiles it."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def __getattr__(self, name: str) -> Any:  # search, sub, match, finditer...: the compiled pattern's
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"
