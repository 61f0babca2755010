"""The pandera contract for a transactions snapshot, and its stored distribution baseline.

The schema states what the model may assume: types, no nulls, plausible ranges, the
allowed categories, a fraud rate that is not absurd, and (from ``fraud_baseline.json``,
shipped beside this file) that the numeric columns have not moved far from the baseline
snapshot. Regenerate the baseline only on purpose, reviewed like code:

    python -m reference_pipelines.fraud_schema --write-baseline
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from .fraud_data import BASE_DATE, COUNTRIES, LABEL, MERCHANT_CATEGORIES, generate

BASELINE_PATH = Path(__file__).with_name("fraud_baseline.json")
BASELINE_SNAPSHOT = BASE_DATE.isoformat()
BASELINE_COLUMNS = ("amount", "hour", "card_age_days", "tx_last_24h")
# Tolerances in baseline standard deviations. Sampling noise of a 20k-row mean is about
# 0.007 sigma and a year of natural drift about 0.2; a units or currency bug is > 1.
MAX_SHIFT_SIGMAS = 0.5
MAX_STD_RATIO = 1.5
MAX_AMOUNT = 50_000.0


def _version() -> str:
    """Changes when the schema's code or the baseline changes: the validate step's cache version."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(BASELINE_PATH.read_bytes() if BASELINE_PATH.exists() else b"no-baseline")
    return h.hexdigest()[:16]


SCHEMA_VERSION = _version()


def base_schema() -> Any:
    """Types, nulls, ranges and categories (no baseline)."""
    import pandera.pandas as pa

    return pa.DataFrameSchema(
        {
            "tx_id": pa.Column("int64", unique=True),
            "amount": pa.Column("float64", [pa.Check.gt(0.0), pa.Check.le(MAX_AMOUNT)]),
            "merchant_category": pa.Column(str, pa.Check.isin(MERCHANT_CATEGORIES)),
            "hour": pa.Column("int64", pa.Check.in_range(0, 23)),
            "country": pa.Column(str, pa.Check.isin(COUNTRIES)),
            "card_age_days": pa.Column("int64", pa.Check.in_range(0, 36_500)),
            "tx_last_24h": pa.Column("int64", pa.Check.in_range(0, 1_000)),
            "is_foreign": pa.Column(bool),
            LABEL: pa.Column("int64", pa.Check.isin([0, 1])),
        },
        checks=[
            # A feed whose labels are nearly all one class is broken, not a hard month.
            pa.Check(lambda df: 0.002 <= df[LABEL].mean() <= 0.2, error="fraud rate within [0.2%, 20%]"),
        ],
        strict=True,  # an unexpected column is a contract change: review it, do not guess
        coerce=False,
        name="transactions",
    )


def schema() -> Any:
    """The full contract: ``base_schema()`` plus distribution checks from the stored baseline."""
    from interlock.plugins.pandera import with_baseline

    return with_baseline(
        base_schema(), BASELINE_PATH, max_shift_sigmas=MAX_SHIFT_SIGMAS, max_std_ratio=MAX_STD_RATIO
    )


def write_reference_baseline(path: Path = BASELINE_PATH) -> dict[str, Any]:
    from interlock.plugins.pandera import write_baseline

    return write_baseline(generate(BASELINE_SNAPSHOT), path, BASELINE_COLUMNS)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-baseline"]:
        raise SystemExit("usage: python -m reference_pipelines.fraud_schema --write-baseline")
    write_reference_baseline()
    print(BASELINE_PATH)
