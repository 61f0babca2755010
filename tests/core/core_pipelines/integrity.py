"""Pipelines for the cache-integrity and receipt-truth tests (issue 11). Needs pandas."""

from __future__ import annotations

import pandas as pd

import interlock as il


@il.step
def levels(order: str) -> pd.DataFrame:
    cats = order.split(",")
    return pd.DataFrame({"c": pd.Categorical(["low", "high", "low"], categories=cats, ordered=True)})


@il.step(cache=il.Cache())
def highest(df: pd.DataFrame) -> str:
    return str(df["c"].max())


@il.pipeline(name="ordered-levels")
def ordered_levels(order: str = "low,high"):
    return highest(df=levels(order=order))
