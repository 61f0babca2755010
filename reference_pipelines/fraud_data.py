"""Frozen, seeded synthetic card transactions: the snapshot id fully determines the data.

A snapshot id is a date, ``"2026-11-01"``. Its seed comes from sha256 of the id (never
Python's ``hash()``, which is salted per process), so every process, backend and machine
generates the same rows. Snapshots after ``BASE_DATE`` drift a little, month by month, as
fraud does: amounts creep up, fraud moves towards online categories, the base rate rises.

Failure drills use a documented id convention: ``"corrupt-<mode>:<date>"`` generates the
clean snapshot of ``<date>`` and then damages it deterministically:

- ``corrupt-nulls``   1% of ``amount`` and ``country`` values are null
- ``corrupt-range``   some amounts are negative or absurdly large (a units bug)
- ``corrupt-missing`` the ``card_age_days`` column is gone (an upstream schema change)
- ``corrupt-shift``   every amount is 3x (a currency bug): only the baseline check sees it

A drift drill, ``"drifted:<date>"``, is the snapshot of ``<date>`` after the world moved (not a
broken feed: it passes validation): amounts 1.4x (KS about 0.14) and 40% of the grocery,
restaurant and fuel spending moved online (PSI about 0.25 on ``merchant_category``), what
``il.OnDrift`` is there to notice.

As files: ``write_snapshot(folder, id)`` writes ``<folder>/<id>.parquet``, and ``load(ref)``
reads a snapshot by id or from such a file (a path or ``file://`` URI), which is how a data
trigger hands a run the new object it found.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_DATE = _dt.date(2026, 11, 1)
ROWS = 20_000
LABEL = "is_fraud"
MERCHANT_CATEGORIES = (
    "grocery", "restaurants", "fuel", "travel", "electronics", "online_retail", "gaming", "jewelry",
)
COUNTRIES = ("US", "GB", "DE", "FR", "NL", "ES", "BR", "IN", "NG")
CORRUPTIONS = ("nulls", "range", "missing", "shift")
DRIFTED = "drifted"  # the drift drill's prefix: "drifted:2026-12-01"
DRIFT_AMOUNT = 1.4
DRIFT_ONLINE_SHARE = 0.4  # of offline spending (grocery, restaurants, fuel) moved online
COLUMNS = (
    "tx_id", "amount", "merchant_category", "hour", "country", "card_age_days", "tx_last_24h",
    "is_foreign", LABEL,
)

_CATEGORY_P = (0.26, 0.17, 0.12, 0.06, 0.09, 0.18, 0.07, 0.05)
_COUNTRY_P = (0.55, 0.10, 0.08, 0.07, 0.04, 0.05, 0.05, 0.04, 0.02)
# Spending by hour of day: quiet at night, a peak in the early evening.
_HOUR_W = (1, 0.6, 0.4, 0.3, 0.3, 0.5, 1.2, 2.5, 3.5, 4, 4.2, 4.5, 5, 4.8, 4.5, 4.5, 4.8, 5.5, 6, 5.5, 4.5, 3.5, 2.5, 1.6)
_CATEGORY_RISK = {
    "grocery": -0.6, "restaurants": -0.4, "fuel": 0.0, "travel": 0.5, "electronics": 0.9,
    "online_retail": 0.7, "gaming": 1.0, "jewelry": 1.2,
}


@dataclass(frozen=True)
class Snapshot:
    """A parsed snapshot id: the date that seeds the data and an optional corruption mode."""

    id: str
    date: _dt.date
    corruption: str | None = None
    drifted: bool = False

    @property
    def months_since_base(self) -> float:
        return (self.date - BASE_DATE).days / 30.0


def parse_snapshot(snapshot_id: str) -> Snapshot:
    """``"2026-11-01"``, ``"corrupt-<mode>:2026-11-01"`` or ``"drifted:2026-11-01"``; anything
    else is a ValueError."""
    corruption = None
    date_part = snapshot_id
    drifted = snapshot_id.startswith(f"{DRIFTED}:")
    if drifted:
        date_part = snapshot_id[len(DRIFTED) + 1:]
    elif snapshot_id.startswith("corrupt-"):
        mode, sep, date_part = snapshot_id[len("corrupt-"):].partition(":")
        if not sep or mode not in CORRUPTIONS:
            raise ValueError(
                f"bad snapshot id {snapshot_id!r}: corruption ids are 'corrupt-<mode>:<YYYY-MM-DD>' "
                f"with mode one of {', '.join(CORRUPTIONS)}"
            )
        corruption = mode
    try:
        date = _dt.date.fromisoformat(date_part)
    except ValueError:
        raise ValueError(f"bad snapshot id {snapshot_id!r}: expected a date such as '2026-11-01'") from None
    return Snapshot(snapshot_id, date, corruption, drifted)


def snapshot_seed(date: _dt.date) -> int:
    """A stable 63-bit seed for a snapshot date (sha256, identical in every process)."""
    digest = hashlib.sha256(f"interlock-fraud-snapshot:{date.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def generate(snapshot_id: str, rows: int = ROWS) -> Any:
    """The snapshot's transactions as a pandas DataFrame (columns: ``COLUMNS``)."""
    import numpy as np
    import pandas as pd

    snap = parse_snapshot(snapshot_id)
    rng = np.random.default_rng(snapshot_seed(snap.date))
    drift = snap.months_since_base

    amount = np.round(np.clip(rng.lognormal(3.6 + 0.02 * drift, 1.0, rows), 0.5, 20_000.0), 2)
    hour_p = np.asarray(_HOUR_W) / sum(_HOUR_W)
    hour = rng.choice(24, size=rows, p=hour_p)
    category = rng.choice(len(MERCHANT_CATEGORIES), size=rows, p=_CATEGORY_P)
    home = rng.choice(len(COUNTRIES), size=rows, p=_COUNTRY_P)
    is_foreign = rng.random(rows) < 0.08
    # A foreign transaction happens in any country but the cardholder's own.
    other = (home + rng.integers(1, len(COUNTRIES), size=rows)) % len(COUNTRIES)
    country = np.where(is_foreign, other, home)
    card_age_days = np.clip(rng.exponential(700.0, rows), 0, 3650).astype("int64")
    tx_last_24h = np.clip(rng.poisson(1.5, rows) + rng.poisson(0.3, rows) * 4, 0, 200).astype("int64")

    # Fraud: a logistic function of the features. Drift moves the risk towards online
    # categories and raises the base rate a little each month.
    risk = np.array([_CATEGORY_RISK[c] for c in MERCHANT_CATEGORIES])
    online = np.array([c in ("online_retail", "gaming", "electronics") for c in MERCHANT_CATEGORIES])
    risk = risk + 0.05 * drift * online
    night = (hour < 6).astype(float)
    z = (
        -4.95 + 0.03 * drift
        + 0.6 * (np.log(amount) - 3.6)
        + 1.3 * is_foreign
        + 0.9 * night
        + 1.1 * (card_age_days < 60)
        + 0.18 * tx_last_24h
        + risk[category]
    )
    is_fraud = (rng.random(rows) < 1.0 / (1.0 + np.exp(-z))).astype("int64")

    df = pd.DataFrame({
        "tx_id": np.arange(1, rows + 1, dtype="int64"),
        "amount": amount.astype("float64"),
        "merchant_category": np.asarray(MERCHANT_CATEGORIES, dtype=object)[category],
        "hour": hour.astype("int64"),
        "country": np.asarray(COUNTRIES, dtype=object)[country],
        "card_age_days": card_age_days,
        "tx_last_24h": tx_last_24h,
        "is_foreign": is_foreign.astype(bool),
        LABEL: is_fraud,
    })
    if snap.drifted:
        df = apply_drift(df, rng)
    return corrupt(df, snap.corruption, rng) if snap.corruption else df


def apply_drift(df: Any, rng: Any) -> Any:
    """The world moved (see the module docstring): larger amounts, spending moved online."""
    import numpy as np

    df = df.copy()
    df["amount"] = (df["amount"] * DRIFT_AMOUNT).round(2)
    category = np.array(df["merchant_category"].astype(object).to_numpy(), copy=True)
    moved = np.isin(category, ("grocery", "restaurants", "fuel")) & (rng.random(len(df)) < DRIFT_ONLINE_SHARE)
    category[moved] = rng.choice(("online_retail", "gaming", "electronics"), size=int(moved.sum()))
    df["merchant_category"] = category
    return df


def snapshot_path(folder: str | Path, snapshot_id: str) -> Path:
    """Where ``write_snapshot`` puts snapshot ``snapshot_id`` (``:`` is not portable in file names)."""
    return Path(folder) / f"{snapshot_id.replace(':', '_')}.parquet"


def write_snapshot(folder: str | Path, snapshot_id: str, rows: int = ROWS) -> Path:
    """Write snapshot ``snapshot_id`` as a parquet file in ``folder`` (atomically: a watcher
    listing the folder never sees half of it) and return its path."""
    import os

    path = snapshot_path(folder, snapshot_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")  # a dotfile: listings skip it
    generate(snapshot_id, rows).to_parquet(tmp, index=False)
    os.replace(tmp, path)
    return path


def is_file_ref(ref: str) -> bool:
    """Whether ``ref`` names a snapshot file (a path or file:// URI) rather than an id."""
    return ref.startswith("file://") or ref.endswith((".parquet", ".csv")) or "/" in ref


def load(ref: str) -> Any:
    """A snapshot by id (generated) or from a file that ``write_snapshot`` wrote (or any parquet
    or csv file with the same columns)."""
    import pandas as pd

    if not is_file_ref(ref):
        return generate(ref)
    path = ref.removeprefix("file://")
    return pd.read_csv(path) if path.endswith(".csv") else pd.read_parquet(path)


def corrupt(df: Any, mode: str, rng: Any) -> Any:
    """Damage a clean snapshot the way real feeds break (see the module docstring)."""
    df = df.copy()
    n = len(df)
    if mode == "nulls":
        rows = rng.choice(n, size=max(1, n // 100), replace=False)
        df.loc[df.index[rows], "amount"] = float("nan")
        df["country"] = df["country"].astype(object)
        df.loc[df.index[rows[: len(rows) // 2]], "country"] = None
    elif mode == "range":
        rows = rng.choice(n, size=max(2, n // 500), replace=False)
        half = len(rows) // 2
        df.loc[df.index[rows[:half]], "amount"] = -df["amount"].iloc[rows[:half]].to_numpy()
        df.loc[df.index[rows[half:]], "amount"] = df["amount"].iloc[rows[half:]].to_numpy() * 1e6
    elif mode == "missing":
        df = df.drop(columns=["card_age_days"])
    elif mode == "shift":
        df["amount"] = (df["amount"] * 3.0).round(2)
    else:  # parse_snapshot already refuses unknown modes
        raise ValueError(f"unknown corruption mode {mode!r}")
    return df


def content_sha256(df: Any) -> str:
    """sha256 of a frame's columns, dtypes and values: the snapshot's content in the receipt."""
    import pandas as pd

    h = hashlib.sha256()
    h.update(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return h.hexdigest()
