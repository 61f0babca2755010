"""Cached steps: a DataFrame consumer (hashed by content) and a step that can be made to fail."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import interlock as il


@il.step
def make_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"a": list(range(n)), "b": [i / 2 for i in range(n)]})


@il.step(cache=il.Cache())
def frame_total(df: pd.DataFrame) -> float:
    return float(df["a"].sum() + df["b"].sum())


@il.pipeline(name="frame-cache")
def frame_cache(n: int = 4):
    return frame_total(df=make_frame(n=n))


@il.step(cache=il.Cache())
def maybe_fail(x: int, flag_path: str) -> int:
    if Path(flag_path).exists():
        raise il.ValidationFailed("the flag file says fail")
    return x + 1


@il.pipeline(name="fail-cache")
def fail_cache(flag_path: str, x: int = 1):
    return maybe_fail(x=x, flag_path=flag_path)
