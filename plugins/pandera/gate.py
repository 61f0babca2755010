"""The validation gate: run a pandera schema lazily and stop the run with a readable report.

Lazy validation collects every failure in one pass, so a bad feed is fixed in one round
trip instead of one column at a time. The report (``ValidationFailed.report``) is plain
JSON data so that it can go into the run's receipt.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any

from interlock.core.base.errors import ValidationFailed

from .baseline import STATS_KEY, describe_shift

# Failures about the frame's shape rather than its values: the report states pandera's own
# sentence for them (e.g. "expected series 'n' to have type int64, got str").
_STRUCTURAL = {
    "column_not_in_dataframe",
    "wrong_dtype",
    "column_not_in_schema",
    "duplicate_dataframe_column_labels",
    "column_not_ordered",
    "dataframe_column_labels_not_unique",
    "mismatch_index",
    "wrong_field_name",
}


def validate(
    df: Any,
    schema: Any,
    *,
    step: str | None = None,
    max_examples: int = 5,
) -> Any:
    """Validate ``df`` against a pandera ``DataFrameSchema`` (or ``DataFrameModel`` class).

    Returns what pandera returns (the frame, coerced where the schema says ``coerce``).
    Raises ``ValidationFailed`` naming every failing column and check, how many values
    failed, up to ``max_examples`` examples each, and ``step`` when given.
    """
    import pandera.errors as pa_errors

    if isinstance(schema, type) and hasattr(schema, "to_schema"):
        schema = schema.to_schema()
    try:
        return schema.validate(df, lazy=True)
    except pa_errors.SchemaErrors as exc:
        report = [_entry(se, df, max_examples) for se in exc.schema_errors]
        raise ValidationFailed(_message(report, df, step), report=report) from exc
    except pa_errors.SchemaError as exc:
        # Raised outside lazy collection (e.g. a frame-level error).
        report = [_entry(exc, df, max_examples)]
        raise ValidationFailed(_message(report, df, step), report=report) from exc


def _check_name(check: Any) -> str:
    if check is None:
        return "unknown"
    if isinstance(check, str):
        return check
    return str(getattr(check, "error", None) or getattr(check, "name", None) or check)


def _entry(se: Any, df: Any, max_examples: int) -> dict[str, Any]:
    """One report entry for one pandera ``SchemaError``."""
    import pandas as pd

    reason = getattr(getattr(se, "reason_code", None), "value", None)
    column = getattr(se, "column_name", None)
    cases = getattr(se, "failure_cases", None)
    examples: list[dict[str, Any]] = []
    if isinstance(cases, pd.DataFrame) and "failure_case" in cases.columns:
        count = int(len(cases))
        head = cases.head(max_examples)
        # Column-wise lists keep each value's own type (iterrows would upcast ints to floats).
        indexes = head["index"].tolist() if "index" in head.columns else [None] * len(head)
        for idx, value in zip(indexes, head["failure_case"].tolist(), strict=True):
            examples.append({"index": _jsonable(idx), "value": _jsonable(value)})
    elif cases is None:
        count = 0
    else:  # a scalar failure case, e.g. the name of a missing column
        count = 1
        if reason == "column_not_in_dataframe" and column is None:
            column = str(cases)
    entry: dict[str, Any] = {
        "column": None if column is None else str(column),
        "check": _check_name(getattr(se, "check", None)),
        "reason": reason,
        "failure_cases_count": count,
        "examples": examples,
    }
    check = getattr(se, "check", None)
    stats = getattr(check, "statistics", None)
    if (
        isinstance(stats, Mapping)
        and STATS_KEY in stats
        and column is not None
        and column in df.columns
    ):
        entry["detail"] = describe_shift(df[column], stats)
        entry["examples"] = []  # a distribution check fails as a whole; "False" is no example
    elif reason in _STRUCTURAL:
        entry["detail"] = str(se).splitlines()[0]
    return entry


def _jsonable(value: Any) -> Any:
    """Plain JSON value for a pandas/numpy cell (NaN and NaT become None)."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float):
        return None if math.isnan(value) else (str(value) if math.isinf(value) else value)
    if isinstance(value, bool | int | str):
        return value
    try:
        import pandas as pd

        if value is pd.NaT or (not isinstance(value, list | dict | tuple) and pd.isna(value)):
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    return str(value)


def _fmt(value: Any) -> str:
    return "null" if value is None else repr(value)


def _message(report: list[dict[str, Any]], df: Any, step: str | None) -> str:
    where = f" in step {step!r}" if step else ""
    shape = getattr(df, "shape", None)
    size = f" ({shape[0]} rows x {shape[1]} columns)" if shape else ""
    lines = [f"validation failed{where}: {len(report)} check(s) failed{size}"]
    for e in report:
        subject = f"column {e['column']!r}" if e["column"] is not None else "frame"
        line = f"  - {subject}: {e['check']}"
        if e.get("detail"):
            line += f": {e['detail']}"
        if e["examples"]:
            shown = ", ".join(f"row {x['index']}: {_fmt(x['value'])}" for x in e["examples"])
            more = e["failure_cases_count"] - len(e["examples"])
            sep = "; " if e.get("detail") else ": "
            line += f"{sep}{e['failure_cases_count']} failing value(s), e.g. {shown}"
            if more > 0:
                line += f" (+{more} more)"
        lines.append(line)
    return "\n".join(lines)
