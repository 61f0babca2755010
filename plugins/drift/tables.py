"""Reading the tables drift compares: parquet or csv by suffix, local or any URI pandas reads."""

from __future__ import annotations

from typing import Any

from interlock.core.base.errors import WatchError

SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".csv.gz": "csv"}


def read_table(uri: str) -> Any:
    """The table at ``uri`` as a pandas DataFrame; a WatchError names a suffix it cannot read."""
    import pandas as pd

    path = uri.removeprefix("file://")
    fmt = next((f for s, f in SUFFIXES.items() if path.lower().endswith(s)), None)
    if fmt is None:
        raise WatchError(f"cannot read {uri} as a table: its suffix is none of {', '.join(SUFFIXES)}",
                         hint="il.OnDrift compares parquet or csv files; narrow the trigger with pattern='*.parquet'")
    try:
        return pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise WatchError(f"cannot read the table {uri}: {type(exc).__name__}: {exc}") from exc
