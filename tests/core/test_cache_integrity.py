"""Cache entries are verified on read, and DataFrame keys see dtypes in full (issue 11, item 8)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import interlock as il
from interlock.core.model.codecs import dataframe_hash
from interlock.core.run.cache import cache_key

pd = pytest.importorskip("pandas")

from core_pipelines import frames, integrity  # noqa: E402  (needs pandas)


def entry_of(workdir: Path, step: str) -> Path:
    [entry] = [p.parent for p in (workdir / "cache" / step).glob("*/COMPLETE")]
    return entry


@pytest.mark.parametrize("damage", ["truncate", "delete", "flip"])
def test_a_damaged_entry_is_a_miss_that_is_rewritten(tmp_path: Path, damage: str, caplog) -> None:
    first = il.run(frames.frame_cache, backend="local", workdir=tmp_path, n=4)
    value = entry_of(tmp_path, "frame_total") / "o0" / "value.json"
    if damage == "truncate":
        value.write_text(value.read_text()[:2])
    elif damage == "delete":
        value.unlink()
    else:
        value.write_text(value.read_text().replace("9", "8"))  # still valid JSON: 8.0, the wrong answer
    with caplog.at_level(logging.WARNING, logger="interlock.cache"):
        second = il.run(frames.frame_cache, backend="local", workdir=tmp_path, n=4)
    assert second.steps["frame_total"].status == "succeeded"  # a miss: the step ran again
    assert second.outputs == first.outputs == {"o0": 9.0}
    assert any("damaged" in r.getMessage() and "frame_total" in r.getMessage() for r in caplog.records)
    third = il.run(frames.frame_cache, backend="local", workdir=tmp_path, n=4)  # rewritten: a hit again
    assert third.steps["frame_total"].status == "cached" and third.outputs == first.outputs


def test_a_damaged_dataframe_entry_does_not_crash_later_runs(tmp_path: Path) -> None:
    il.run(integrity.ordered_levels, backend="local", workdir=tmp_path)
    # A byte that is not JSON at all: before checksums, every later run crashed reading it.
    entry = entry_of(tmp_path, "highest")
    (entry / "o0" / "value.json").write_bytes(b"\x00")
    again = il.run(integrity.ordered_levels, backend="local", workdir=tmp_path)
    assert again.steps["highest"].status == "succeeded" and again.outputs == {"o0": "high"}


def test_ordered_categoricals_with_another_order_do_not_share_a_key(tmp_path: Path) -> None:
    a = il.run(integrity.ordered_levels, backend="local", workdir=tmp_path, order="low,high")
    b = il.run(integrity.ordered_levels, backend="local", workdir=tmp_path, order="high,low")
    assert a.outputs == {"o0": "high"}
    assert b.steps["highest"].status == "succeeded"
    assert b.outputs == {"o0": "low"}  # with high < low, "low" is the largest


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param(lambda: pd.DataFrame({"c": pd.Categorical(["a"], categories=["a", "b"], ordered=True)}),
                     lambda: pd.DataFrame({"c": pd.Categorical(["a"], categories=["b", "a"], ordered=True)}),
                     id="category-order"),
        pytest.param(lambda: pd.DataFrame({"c": pd.Categorical(["a"], categories=["a", "b"], ordered=True)}),
                     lambda: pd.DataFrame({"c": pd.Categorical(["a"], categories=["a", "b"], ordered=False)}),
                     id="ordered-flag"),
        pytest.param(lambda: pd.DataFrame({"c": pd.Categorical(["a"], categories=["a", "b"])}),
                     lambda: pd.DataFrame({"c": pd.Categorical(["a"], categories=["a", "b", "z"])}),
                     id="category-set"),
        pytest.param(lambda: pd.DataFrame({0: [1]}), lambda: pd.DataFrame({"0": [1]}), id="column-name-type"),
        pytest.param(lambda: pd.DataFrame({"a": [1]}, index=pd.Index([0], name="i")),
                     lambda: pd.DataFrame({"a": [1]}, index=pd.Index([0], name="j")), id="index-name"),
        pytest.param(lambda: pd.DataFrame({"a": [1]}, index=pd.Index([1], dtype="int64")),
                     lambda: pd.DataFrame({"a": [1]}, index=pd.Index([1.0], dtype="float64")), id="index-dtype"),
    ],
)
def test_dataframe_key_covers_dtypes_in_full(left, right) -> None:
    spec = frames.frame_total.spec
    assert dataframe_hash(left()) != dataframe_hash(right())
    assert cache_key(spec, {"df": left()}) != cache_key(spec, {"df": right()})


@pytest.mark.parametrize(
    "make",
    [
        lambda: pd.DataFrame({"c": pd.Categorical(["low", "high"], categories=["high", "low"], ordered=True)}),
        lambda: pd.DataFrame({0: [1, 2], 1: ["a", "b"]}),  # int labels (mixed types become str in parquet)
        lambda: pd.DataFrame({"a": [1, 2]}, index=pd.MultiIndex.from_tuples([(1, "a"), (2, "b")], names=["i", "j"])),
    ],
)
def test_dataframe_key_survives_the_parquet_round_trip(tmp_path: Path, make) -> None:
    # Steps hand frames to each other through parquet: a frame read back must hit.
    df = make()
    df.to_parquet(tmp_path / "f.parquet", index=True)
    assert dataframe_hash(pd.read_parquet(tmp_path / "f.parquet")) == dataframe_hash(df)
