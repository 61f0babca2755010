"""A DataFrame producer and a cached consumer (the key hashes the frame's content). Needs pandas."""

from __future__ import annotations

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
