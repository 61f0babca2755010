"""``Backoff``: the exponential backoff of CONTENTION retries (see retry.py's module doc).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from interlock.core.base.errors import PolicyError
from interlock.core.model.retry import MAX_CONTENTION_ATTEMPTS, Duration, _count


def _duration_json(value: Duration | None) -> str | float | int | None:
    # Keep what the user wrote ("5m") so compiled specs stay readable; timedelta is not JSON.
    from interlock.core.base.durations import timedelta_seconds

    seconds = timedelta_seconds(value)
    return value if seconds is None else seconds


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff for CONTENTION: ``delay(n) = min(first * factor**(n-1), max_delay)``.

    Durations take "30s", "5m", "1h30m" or seconds. ``max_total`` bounds the sum of waits
    (None: no bound). ``attempts`` is the number of retries, not counting the first try.
    """

    attempts: int = 4
    first: Duration = "5m"
    factor: float = 2.0
    max_delay: Duration = "1h"
    max_total: Duration | None = "6h"

    def __post_init__(self) -> None:
        _count("Backoff", "attempts", self.attempts, 0, MAX_CONTENTION_ATTEMPTS)
        from interlock.core.base.durations import parse_duration

        first_s = parse_duration(self.first, "Backoff first")
        if first_s <= 0:
            raise PolicyError(f"Backoff first={self.first!r} must be longer than 0s")
        f = self.factor
        if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f) or f < 1:
            raise PolicyError(f"Backoff factor={f!r} must be a finite number >= 1")
        max_delay_s = parse_duration(self.max_delay, "Backoff max_delay")
        if max_delay_s < first_s:
            raise PolicyError(
                f"Backoff max_delay={self.max_delay!r} is shorter than first={self.first!r}"
            )
        max_total_s = None
        if self.max_total is not None:
            max_total_s = parse_duration(self.max_total, "Backoff max_total")
            if self.attempts > 0 and max_total_s < first_s:
                raise PolicyError(
                    f"Backoff max_total={self.max_total!r} is shorter than first={self.first!r}: "
                    "no retry could ever happen",
                    hint="raise max_total, or set attempts=0 to disable contention retries",
                )
        # Parsed once; frozen dataclasses allow this through object.__setattr__.
        object.__setattr__(self, "_first_s", first_s)
        object.__setattr__(self, "_max_delay_s", max_delay_s)
        object.__setattr__(self, "_max_total_s", max_total_s)

    @property
    def first_s(self) -> float:
        return self._first_s  # type: ignore[attr-defined]

    @property
    def max_delay_s(self) -> float:
        return self._max_delay_s  # type: ignore[attr-defined]

    @property
    def max_total_s(self) -> float | None:
        return self._max_total_s  # type: ignore[attr-defined]

    def delay(self, n: int) -> float:
        """Seconds to wait before contention retry number ``n`` (1-based)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"Backoff.delay(n={n!r}): n counts retries from 1")
        first, cap = self.first_s, self.max_delay_s
        if self.factor == 1 or first >= cap:
            return min(first, cap)
        # Compare in log space: factor**(n-1) overflows a float long before n reaches 10_000.
        if (n - 1) * math.log(self.factor) >= math.log(cap / first):
            return cap
        return min(first * self.factor ** (n - 1), cap)

    def delays(self) -> tuple[float, ...]:
        """The waits actually used: one per attempt, stopping where max_total would be passed."""
        out: list[float] = []
        total = 0.0
        for n in range(1, self.attempts + 1):
            d = self.delay(n)
            if self.max_total_s is not None and total + d > self.max_total_s:
                break
            out.append(d)
            total += d
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "first": _duration_json(self.first),
            "factor": self.factor,
            "max_delay": _duration_json(self.max_delay),
            "max_total": _duration_json(self.max_total),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Backoff:
        if not isinstance(data, dict):
            raise PolicyError(f"Backoff must be a mapping, got {data!r}")
        unknown = set(data) - {"attempts", "first", "factor", "max_delay", "max_total"}
        if unknown:
            raise PolicyError(f"Backoff has no field(s) {sorted(unknown)}")
        return cls(**data)
