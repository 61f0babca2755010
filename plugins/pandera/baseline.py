"""Distribution baselines: record a feed's column statistics once, fail later feeds that drift.

``write_baseline`` stores per-column statistics (mean, std, quantiles, null fraction) as a
small JSON file; ``distribution_check`` / ``baseline_checks`` turn that baseline into pandera
checks. The shift is measured in baseline standard deviations ("sigmas"): how far the new
feed's centre moved, so the tolerance does not depend on the feed's size or units.
With only quantiles in the baseline, the median is the centre and IQR/1.349 the robust sigma.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.base.errors import ValidationFailed

BASELINE_FORMAT = 1
SHIFT_CHECK_NAME = "distribution_shift"
# The key in a check's (public) ``statistics`` under which the gate finds what it needs to
# explain a failed shift check in words.
STATS_KEY = "interlock_baseline"
_QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
_IQR_TO_SIGMA = 1.349  # IQR of a normal distribution, in sigmas


def write_baseline(df: Any, path: str | os.PathLike[str], columns: Iterable[str]) -> dict[str, Any]:
    """Write the statistics of numeric ``columns`` of ``df`` to ``path`` (JSON); return them."""
    import pandas as pd

    stats: dict[str, Any] = {}
    for col in columns:
        if col not in df.columns:
            raise ValidationFailed(
                f"cannot write a baseline: column {col!r} is not in the frame",
                report=[
                    {
                        "column": col,
                        "check": "column_in_dataframe",
                        "failure_cases_count": 1,
                        "examples": [],
                    }
                ],
            )
        series = pd.to_numeric(df[col], errors="raise").astype("float64")
        values = series.dropna()
        if values.empty:
            raise ValidationFailed(
                f"cannot write a baseline: column {col!r} has no non-null values"
            )
        stats[col] = {
            "count": int(values.size),
            "mean": float(values.mean()),
            "std": float(values.std(ddof=0)),
            "null_fraction": float(series.isna().mean()),
            "quantiles": {str(q): float(values.quantile(q)) for q in _QUANTILES},
        }
    doc = {"format": BASELINE_FORMAT, "columns": stats}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
    os.replace(tmp, target)  # a reader never sees half a baseline
    return doc


def load_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a baseline written by ``write_baseline``."""
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("columns"), dict):
        raise ValidationFailed(f"{path} is not an interlock baseline (no 'columns' mapping)")
    return doc


@dataclass(frozen=True)
class _Reference:
    """The centre and scale a column is compared against."""

    measure: str  # "mean" or "median"
    center: float
    sigma: float
    std: float | None  # the baseline std, when known (for the spread test)


def _reference(column: str, stats: Mapping[str, Any]) -> _Reference:
    if "mean" in stats and "std" in stats:
        return _Reference("mean", float(stats["mean"]), float(stats["std"]), float(stats["std"]))
    q = {float(k): float(v) for k, v in (stats.get("quantiles") or {}).items()}
    if {0.25, 0.5, 0.75} <= q.keys():
        return _Reference("median", q[0.5], (q[0.75] - q[0.25]) / _IQR_TO_SIGMA, None)
    raise ValueError(
        f"baseline for column {column!r} needs 'mean' and 'std', or 'quantiles' with 0.25, 0.5 and 0.75"
    )


def _column_stats(column: str, baseline: Mapping[str, Any]) -> Mapping[str, Any]:
    # Accept either one column's statistics or a whole baseline document.
    if isinstance(baseline.get("columns"), Mapping):
        try:
            return baseline["columns"][column]
        except KeyError:
            raise ValueError(f"the baseline has no statistics for column {column!r}") from None
    return baseline


def measure_shift(series: Any, column: str, stats: Mapping[str, Any]) -> dict[str, Any]:
    """Compare ``series`` with the baseline ``stats``; JSON-able figures, ``shift_sigmas`` first."""
    import pandas as pd

    ref = _reference(column, stats)
    values = pd.to_numeric(series, errors="coerce").dropna().astype("float64")
    if values.empty:
        return {
            "measure": ref.measure,
            "observed": None,
            "baseline": ref.center,
            "shift_sigmas": math.inf,
        }
    observed = float(values.mean() if ref.measure == "mean" else values.median())
    delta = abs(observed - ref.center)
    if ref.sigma > 0:
        shift = delta / ref.sigma
    else:  # a constant baseline: any move at all is an infinite shift
        shift = 0.0 if delta == 0 else math.inf
    out: dict[str, Any] = {
        "measure": ref.measure,
        "observed": observed,
        "baseline": ref.center,
        "sigma": ref.sigma,
        "shift_sigmas": shift,
    }
    if ref.std is not None:
        obs_std = float(values.std(ddof=0))
        out["observed_std"] = obs_std
        out["std_ratio"] = (
            (obs_std / ref.std) if ref.std > 0 else (1.0 if obs_std == 0 else math.inf)
        )
    return out


def _passes(
    figures: Mapping[str, Any], max_shift_sigmas: float, max_std_ratio: float | None
) -> bool:
    if not figures["shift_sigmas"] <= max_shift_sigmas:
        return False
    if max_std_ratio is not None and "std_ratio" in figures:
        ratio = figures["std_ratio"]
        if not (1.0 / max_std_ratio <= ratio <= max_std_ratio):
            return False
    return True


def describe_shift(series: Any, statistics: Mapping[str, Any]) -> str:
    """Explain, in one line, how ``series`` compares with the baseline held in a check's statistics."""
    info = statistics[STATS_KEY]
    f = measure_shift(series, info["column"], info["stats"])
    if f["observed"] is None:
        return f"column {info['column']!r} has no non-null values to compare with the baseline"
    text = (
        f"{f['measure']} {f['observed']:.6g} is {f['shift_sigmas']:.2f} sigmas from the baseline "
        f"{f['measure']} {f['baseline']:.6g} (sigma {f['sigma']:.6g}); "
        f"tolerance {info['max_shift_sigmas']:g} sigmas"
    )
    if info.get("max_std_ratio") is not None and "std_ratio" in f:
        text += (
            f"; std {f['observed_std']:.6g} is {f['std_ratio']:.2f}x the baseline std "
            f"(tolerance {info['max_std_ratio']:g}x)"
        )
    return text


def distribution_check(
    column: str,
    baseline: Mapping[str, Any],
    *,
    max_shift_sigmas: float = 3.0,
    max_std_ratio: float | None = None,
) -> Any:
    """A pandera ``Check`` for ``column`` that fails when its centre moved too far from ``baseline``.

    ``baseline`` is one column's statistics (``mean``/``std`` or ``quantiles``) or a whole
    document from ``load_baseline``. With ``max_std_ratio`` the spread is also tested: the
    new std must lie within [baseline/ratio, baseline*ratio].
    """
    import pandera.pandas as pa

    if max_shift_sigmas < 0:
        raise ValueError("max_shift_sigmas must be >= 0")
    if max_std_ratio is not None and max_std_ratio < 1:
        raise ValueError("max_std_ratio must be >= 1")
    stats = dict(_column_stats(column, baseline))
    ref = _reference(column, stats)  # fail now, at schema build time, on a bad baseline

    def within_baseline(series: Any) -> bool:
        return _passes(measure_shift(series, column, stats), max_shift_sigmas, max_std_ratio)

    return pa.Check(
        within_baseline,
        name=SHIFT_CHECK_NAME,
        error=f"{SHIFT_CHECK_NAME}({ref.measure}, max {max_shift_sigmas:g} sigmas)",
        # Public, inert data for the gate's report: pandera does not pass it to the function.
        statistics={
            STATS_KEY: {
                "column": column,
                "stats": stats,
                "max_shift_sigmas": max_shift_sigmas,
                "max_std_ratio": max_std_ratio,
            }
        },
    )


def baseline_checks(
    baseline: Mapping[str, Any] | str | os.PathLike[str],
    *,
    columns: Iterable[str] | None = None,
    max_shift_sigmas: float = 3.0,
    max_std_ratio: float | None = None,
) -> dict[str, list[Any]]:
    """One ``distribution_check`` per baselined column: ``{column: [check]}``.

    ``baseline`` is a document from ``load_baseline`` or the path of its JSON file.
    """
    doc = load_baseline(baseline) if isinstance(baseline, str | os.PathLike) else baseline
    names = list(columns) if columns is not None else list(doc["columns"])
    return {
        c: [
            distribution_check(
                c, doc, max_shift_sigmas=max_shift_sigmas, max_std_ratio=max_std_ratio
            )
        ]
        for c in names
    }


def with_baseline(
    schema: Any,
    baseline: Mapping[str, Any] | str | os.PathLike[str],
    *,
    max_shift_sigmas: float = 3.0,
    max_std_ratio: float | None = None,
) -> Any:
    """A copy of ``schema`` whose baselined columns also carry a distribution check.

    Every baselined column must be declared in ``schema``.
    """
    checks = baseline_checks(
        baseline, max_shift_sigmas=max_shift_sigmas, max_std_ratio=max_std_ratio
    )
    missing = [c for c in checks if c not in schema.columns]
    if missing:
        raise ValueError(f"baseline columns {missing} are not declared in the schema")
    return schema.update_columns(
        {c: {"checks": [*schema.columns[c].checks, *extra]} for c, extra in checks.items()}
    )
