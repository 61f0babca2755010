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


@il.step
def login(db_pwd: str, redis_url: str, ctx: il.StepContext) -> str:
    ctx.record(auth_header=f"Bearer {db_pwd}-abcdef", max_tokens=512, tokenizer="bpe", note=f"dialled {redis_url}")
    raise ConnectionRefusedError(f"login refused for password {db_pwd!r} at {redis_url}")


@il.pipeline(name="leaky-login")
def leaky_login(db_pwd: str = "s3cr3t@pass-word", redis_url: str = "redis://:r3dis-pw@cache:6379/0"):
    return login(db_pwd=db_pwd, redis_url=redis_url)


@il.step
def unwritable() -> pd.DataFrame:
    return pd.DataFrame({"a": [object(), object()]})  # parquet cannot hold a plain object


@il.step
def after_unwritable(df: pd.DataFrame) -> int:
    return len(df)


@il.pipeline(name="unwritable-output")
def unwritable_output():
    return after_unwritable(df=unwritable())


@il.step
def small(n: int) -> int:
    return n + 1


@il.pipeline(name="small-one")
def small_one(n: int = 1):
    return small(n=n)


@il.step(checkpoint=il.CheckpointPolicy(every="1s", keep=2))
def fit(n: int, ctx: il.StepContext) -> il.Model:
    restored = ctx.checkpoint.load()  # None on the first run; a fresh scratch directory after
    work = il.Model.new({"n": n, "resumed": restored is not None})
    (work / "weights.bin").write_bytes(bytes(range(n)))
    ctx.checkpoint.save(work.path)  # a directory checkpoint
    again = ctx.checkpoint.load()  # restored into a temporary directory
    assert (again / "weights.bin").read_bytes() == bytes(range(n))
    return work


@il.step
def export(model: il.Model) -> il.Dataset:
    out = il.Dataset.new({"from": "fit"})
    (out / "rows.csv").write_text(f"{len((model / 'weights.bin').read_bytes())}\n")
    return out


@il.step
def count(data: il.Dataset) -> int:
    return int((data / "rows.csv").read_text())


@il.pipeline(name="scratch-free")
def scratch_free(n: int = 8):
    return count(data=export(model=fit(n=n)))
