"""pandera validation gate: ``validate`` raises ``ValidationFailed`` with a readable, JSON-able report.

pandera and pandas are imported inside the functions, so importing this package is cheap.
"""

from .baseline import (
    baseline_checks,
    distribution_check,
    load_baseline,
    measure_shift,
    with_baseline,
    write_baseline,
)
from .gate import validate

__all__ = [
    "baseline_checks",
    "distribution_check",
    "load_baseline",
    "measure_shift",
    "validate",
    "with_baseline",
    "write_baseline",
]
