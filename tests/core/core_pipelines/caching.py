"""A cached step that can be made to fail (a flag file), to show failures write no entry."""

from __future__ import annotations

from pathlib import Path

import interlock as il


@il.step(cache=il.Cache())
def maybe_fail(x: int, flag_path: str) -> int:
    if Path(flag_path).exists():
        raise il.ValidationFailed("the flag file says fail")
    return x + 1


@il.pipeline(name="fail-cache")
def fail_cache(flag_path: str, x: int = 1):
    return maybe_fail(x=x, flag_path=flag_path)
