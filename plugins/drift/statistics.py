"""PSI and KS per feature, and the ``interlock.drift`` plugin that applies them.

- ``psi_index``: the population stability index, sum((a - e) * ln(a / e)) over bins, where ``e`` and
  ``a`` are the reference's and the current data's shares. Bins: the reference's categories
  for a categorical feature (text, bool, or an integer with at most ``MAX_LEVELS`` values),
  the reference's deciles for a numeric one. Shares are floored at ``EPSILON``, so an empty
  bin gives a large finite figure, not infinity. 0.1 is a moderate shift, 0.2 a large one.
- ``ks_statistic``: the two-sample Kolmogorov-Smirnov statistic (``scipy.stats.ks_2samp``), for a
  continuous feature: the largest gap between the two empirical distribution functions.

A continuous feature gets both figures, a categorical one PSI alone; a run starts when any
PSI reaches the trigger's ``psi`` or any KS its ``ks``.
"""

from __future__ import annotations

from typing import Any

from interlock.core.watch.drift import DriftResult

from .tables import read_table

BINS = 10
EPSILON = 1e-4
MAX_LEVELS = 20  # an integer feature with this many values or fewer is binned by value


def psi_index(reference: Any, current: Any, *, categorical: bool = False, bins: int = BINS) -> float:
    """The population stability index of ``current`` against ``reference`` (1-d arrays)."""
    import numpy as np
    import pandas as pd

    ref, cur = pd.Series(reference).dropna(), pd.Series(current).dropna()
    if categorical:
        levels = sorted(set(ref.astype(str)) | set(cur.astype(str)))
        e = ref.astype(str).value_counts(normalize=True).reindex(levels, fill_value=0.0).to_numpy()
        a = cur.astype(str).value_counts(normalize=True).reindex(levels, fill_value=0.0).to_numpy()
    else:
        edges = np.unique(np.quantile(ref.to_numpy(dtype=float), np.linspace(0, 1, bins + 1)))
        edges[0], edges[-1] = -np.inf, np.inf  # what falls outside the reference's range counts too
        e = np.histogram(ref.to_numpy(dtype=float), edges)[0] / max(len(ref), 1)
        a = np.histogram(cur.to_numpy(dtype=float), edges)[0] / max(len(cur), 1)
    e, a = np.maximum(e, EPSILON), np.maximum(a, EPSILON)
    return float(np.sum((a - e) * np.log(a / e)))


def ks_statistic(reference: Any, current: Any) -> float:
    """The two-sample Kolmogorov-Smirnov statistic (0: the same distribution, 1: disjoint)."""
    import numpy as np
    from scipy.stats import ks_2samp

    ref = np.asarray(reference, dtype=float)
    cur = np.asarray(current, dtype=float)
    return float(ks_2samp(ref[~np.isnan(ref)], cur[~np.isnan(cur)]).statistic)


def is_categorical(column: Any) -> bool:
    import pandas as pd

    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        return True
    return bool(pd.api.types.is_integer_dtype(column) and column.nunique() <= MAX_LEVELS)


class PsiKs:
    """The drift statistic ``interlock[drift]`` registers: PSI and KS per feature."""

    def compare(self, reference: str, current: str, *, features: tuple[str, ...] | None, psi: float,
                ks: float) -> DriftResult:
        ref, cur = read_table(reference), read_table(current)
        names = list(features) if features is not None else [c for c in ref.columns if c in cur.columns]
        missing = [n for n in names if n not in ref.columns or n not in cur.columns]
        if missing:
            from interlock.core.base.errors import WatchError

            raise WatchError(f"feature(s) {', '.join(missing)} missing from {reference if missing[0] not in ref.columns else current}",
                             hint=f"columns: {', '.join(map(str, cur.columns))}")
        figures: dict[str, dict[str, Any]] = {}
        for name in names:
            categorical = is_categorical(ref[name])
            stats: dict[str, Any] = {"psi": round(psi_index(ref[name], cur[name], categorical=categorical), 6)}
            if not categorical:
                stats["ks"] = round(ks_statistic(ref[name], cur[name]), 6)
            stats["psi_crossed"] = stats["psi"] >= psi
            if "ks" in stats:
                stats["ks_crossed"] = stats["ks"] >= ks
            figures[str(name)] = stats
        drifted = any(s.get("psi_crossed") or s.get("ks_crossed") for s in figures.values())
        return DriftResult(drifted, figures, reference, current)

