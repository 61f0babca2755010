"""Drift statistics for ``il.OnDrift`` (``pip install 'interlock[drift]'``): the population
stability index and the Kolmogorov-Smirnov statistic, per feature, on parquet or csv tables.

``PsiKs`` is the ``interlock.drift`` entry point ``drift``; ``psi_index`` and ``ks_statistic`` are the two
figures on their own.
"""

from __future__ import annotations

from .statistics import PsiKs, ks_statistic, psi_index
from .tables import read_table

__all__ = ["PsiKs", "ks_statistic", "psi_index", "read_table"]
