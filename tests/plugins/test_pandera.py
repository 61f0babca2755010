"""The pandera validation gate, with real pandera schemas and real DataFrames."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pytest

from interlock.core.base.errors import InterlockError, ValidationFailed
from interlock.plugins.pandera import (
    baseline_checks,
    distribution_check,
    load_baseline,
    validate,
    with_baseline,
    write_baseline,
)

SCHEMA = pa.DataFrameSchema(
    {
        "txn_id": pa.Column(int, unique=True),
        "amount": pa.Column(float, [pa.Check.ge(0), pa.Check.le(10_000)], nullable=False),
        "category": pa.Column(str, pa.Check.isin(["card", "wire", "cash"])),
    }
)


def good_frame(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "txn_id": list(range(n)),
            "amount": [10.0 + i for i in range(n)],
            "category": ["card", "wire", "cash"] * (n // 3),
        }
    )


def failure(df: pd.DataFrame, schema=SCHEMA, **kw) -> ValidationFailed:
    with pytest.raises(ValidationFailed) as info:
        validate(df, schema, **kw)
    return info.value


def entries(exc: ValidationFailed, column: str) -> list[dict]:
    return [e for e in exc.report if e["column"] == column]


def test_passing_frame_is_returned_unchanged():
    df = good_frame()
    before = df.copy()
    out = validate(df, SCHEMA, step="validate")
    pd.testing.assert_frame_equal(out, before)
    pd.testing.assert_frame_equal(df, before)  # the input was not mutated either


def test_nulls_are_reported_with_row_and_count():
    df = good_frame()
    df.loc[[1, 4], "amount"] = np.nan
    exc = failure(df, step="validate")
    (e,) = entries(exc, "amount")
    assert e["check"] == "not_nullable"
    assert e["failure_cases_count"] == 2
    assert [x["index"] for x in e["examples"]] == [1, 4]
    assert all(x["value"] is None for x in e["examples"])
    assert "column 'amount': not_nullable" in str(exc)
    assert "2 failing value(s)" in str(exc)


def test_out_of_range_amounts_name_each_check_and_examples():
    df = good_frame()
    df.loc[2, "amount"] = -3.5
    df.loc[5, "amount"] = 25_000.0
    exc = failure(df, step="validate")
    assert isinstance(exc, InterlockError) and exc.code == "VALIDATION" and not exc.retryable
    assert isinstance(exc.__cause__, pa.errors.SchemaErrors)  # raised `from` pandera's error
    by_check = {e["check"]: e for e in entries(exc, "amount")}
    assert set(by_check) == {"greater_than_or_equal_to(0)", "less_than_or_equal_to(10000)"}
    assert by_check["greater_than_or_equal_to(0)"]["examples"] == [{"index": 2, "value": -3.5}]
    assert by_check["less_than_or_equal_to(10000)"]["examples"] == [{"index": 5, "value": 25000.0}]
    text = str(exc)
    assert text.startswith(
        "validation failed in step 'validate': 2 check(s) failed (6 rows x 3 columns)"
    )
    assert "greater_than_or_equal_to(0): 1 failing value(s), e.g. row 2: -3.5" in text
    assert "less_than_or_equal_to(10000): 1 failing value(s), e.g. row 5: 25000.0" in text


def test_missing_column_is_reported_clearly():
    df = good_frame().drop(columns=["category"])
    exc = failure(df)
    (e,) = entries(exc, "category")
    assert e["check"] == "column_in_dataframe"
    assert e["reason"] == "column_not_in_dataframe"
    assert "not in dataframe" in e["detail"]
    assert "column 'category': column_in_dataframe" in str(exc)
    assert " in step " not in str(exc)  # no step given, none named


def test_wrong_dtype_is_reported_with_expected_and_actual_types():
    df = good_frame()
    df["txn_id"] = [f"t{i}" for i in range(len(df))]
    exc = failure(df)
    (e,) = entries(exc, "txn_id")
    assert e["reason"] == "wrong_dtype"
    assert "int64" in e["detail"] and "got" in e["detail"]
    assert e["failure_cases_count"] == len(df)
    assert "expected series 'txn_id' to have type int64" in str(exc)


def test_disallowed_category_and_every_failure_collected_at_once():
    df = good_frame(9)
    df.loc[[0, 3, 7], "category"] = ["crypto", "crypto", "barter"]
    df.loc[1, "amount"] = -1.0
    exc = failure(df, max_examples=2)
    (cat,) = entries(exc, "category")
    assert cat["check"] == "isin(['card', 'wire', 'cash'])"
    assert cat["failure_cases_count"] == 3
    assert cat["examples"] == [{"index": 0, "value": "crypto"}, {"index": 3, "value": "crypto"}]
    assert "(+1 more)" in str(exc)
    assert entries(exc, "amount"), "lazy validation must also report the amount failure"
    # The report goes into receipts: strict JSON (no NaN) must accept it.
    assert json.loads(json.dumps(exc.report, allow_nan=False)) == exc.report


def test_dataframe_model_class_is_accepted():
    class Txn(pa.DataFrameModel):
        amount: float = pa.Field(ge=0)

    assert validate(pd.DataFrame({"amount": [1.0]}), Txn)["amount"].tolist() == [1.0]
    exc = failure(pd.DataFrame({"amount": [-2.0]}), Txn)
    assert exc.report[0]["column"] == "amount"


def _feed(rng: np.random.Generator, mean: float, std: float = 10.0, n: int = 2000) -> pd.DataFrame:
    return pd.DataFrame(
        {"amount": rng.normal(mean, std, n), "count": rng.poisson(4, n).astype(float)}
    )


def test_distribution_shift_against_written_baseline(tmp_path):
    rng = np.random.default_rng(7)
    path = tmp_path / "baselines" / "txn.json"
    doc = write_baseline(_feed(rng, 100.0), path, ["amount", "count"])
    assert load_baseline(path) == doc
    assert abs(doc["columns"]["amount"]["mean"] - 100.0) < 1.0
    assert set(doc["columns"]["amount"]["quantiles"]) >= {"0.25", "0.5", "0.75"}

    schema = with_baseline(
        pa.DataFrameSchema({"amount": pa.Column(float), "count": pa.Column(float)}),
        path,
        max_shift_sigmas=2.0,
    )
    # A fresh sample of the same distribution passes.
    validate(_feed(rng, 100.0), schema, step="validate")
    # The amount mean moved by 5 baseline sigmas: the shift check names the column and the shift.
    exc = failure(_feed(rng, 150.0), schema, step="validate")
    (e,) = exc.report
    assert e["column"] == "amount"
    assert e["check"].startswith("distribution_shift")
    assert "sigmas from the baseline mean" in e["detail"]
    shift = float(e["detail"].split(" is ")[1].split(" sigmas")[0])
    assert 4.5 < shift < 5.5
    assert "column 'amount': distribution_shift" in str(exc)
    assert "tolerance 2 sigmas" in str(exc)


def test_distribution_check_from_quantiles_and_spread():
    rng = np.random.default_rng(3)
    quantile_only = {"quantiles": {"0.25": 93.255, "0.5": 100.0, "0.75": 106.745}}  # sigma ~= 10
    check = distribution_check("amount", quantile_only, max_shift_sigmas=3.0)
    schema = pa.DataFrameSchema({"amount": pa.Column(float, check)})
    validate(pd.DataFrame({"amount": rng.normal(100.0, 10.0, 1000)}), schema)
    exc = failure(pd.DataFrame({"amount": rng.normal(60.0, 10.0, 1000)}), schema)
    assert "median" in exc.report[0]["detail"]

    spread = baseline_checks(
        {"columns": {"amount": {"mean": 100.0, "std": 10.0}}},
        max_shift_sigmas=3.0,
        max_std_ratio=1.5,
    )
    schema = pa.DataFrameSchema({"amount": pa.Column(float, spread["amount"])})
    validate(pd.DataFrame({"amount": rng.normal(100.0, 11.0, 1000)}), schema)
    exc = failure(pd.DataFrame({"amount": rng.normal(100.0, 30.0, 1000)}), schema)
    assert "x the baseline std" in exc.report[0]["detail"]


def test_bad_baseline_fails_at_schema_build_time():
    with pytest.raises(ValueError, match="mean' and 'std'"):
        distribution_check("amount", {"median": 3})
    with pytest.raises(ValueError, match="no statistics for column 'fee'"):
        distribution_check("fee", {"columns": {"amount": {"mean": 1, "std": 1}}})
