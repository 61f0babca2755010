"""Retry policy (``Retry``, ``Backoff``) and the decision the runtime shim takes after a failure.

The shim runs the same decision on every backend, so a step retries the same way on Flyte,
on KFP and locally. A step that declares nothing is never retried (as a flytekit task with
``retries=0`` or a KFP task without ``set_retry``). Two forms opt in:

- ``Retry(3)`` (or ``@il.step(retry=3)``): three retries of ANY failure, at once; the
  literal port of flytekit's ``retries=3`` and KFP's ``set_retry(3)``.
- the taxonomy, ``Retry(transient=..., contention=..., preempted=...)``: a budget per failure
  kind; a kind it does not name is not retried. Budgets are independent:

- TRANSIENT:  retried at once, up to ``Retry.transient`` times.
- CONTENTION: retried after ``Backoff.delay(n)``, up to ``Backoff.attempts`` times and while
  the total waited stays within ``Backoff.max_total``.
- PREEMPTED:  retried at once, up to ``Retry.preempted`` times; never spends the budget.
- TIMEOUT:    the step ran past its ``timeout``: retried at once, up to ``Retry.timeout``
  times (default 0: a step too slow once is usually too slow again, and each retry costs the
  whole timeout). Counted against the budget, as Flyte counts a task timeout against
  ``retries``.
- FATAL:      never retried, except CUDA OOM with ``oom_remediation=True``: halve the batch,
  double gradient accumulation (same effective batch), retry; until the batch would drop
  below 1 or ``MAX_OOM_HALVINGS`` halvings.

A backend retry may start the step in a fresh process; ``RetryTracker.replay`` (or the pure
``decide``) rebuilds the state from the failures recorded in the receipt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from .errors import PolicyError
from .failures import FailureKind

if TYPE_CHECKING:
    from datetime import timedelta

    # Static re-export for type checkers; at run time __getattr__ below serves them.
    from .retry_decisions import Decision, RetryTracker, decide  # noqa: F401

# What the shim decides after a failure (Decision, RetryTracker, decide) lives in
# retry_decisions.py and loads on first use: a step that never fails never needs it.
_DECISIONS = ("Decision", "RetryTracker", "decide")


def __getattr__(name: str) -> Any:  # PEP 562: `from .retry import RetryTracker` still works
    if name in _DECISIONS:
        from . import retry_decisions

        value = globals()[name] = getattr(retry_decisions, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Backoff", "Decision", "Retry", "RetryTracker", "decide", "MAX_OOM_HALVINGS", "NO_RETRY"]

MAX_TRANSIENT = 10
MAX_ANY = 100
MAX_PREEMPTED = 100
MAX_CONTENTION_ATTEMPTS = 100
# A model that still does not fit at 1/256 of its batch will not fit by halving again.
MAX_OOM_HALVINGS = 8

# "timedelta": datetime is imported only where one is given (durations.timedelta_seconds).
Duration = Union[str, int, float, "timedelta"]  # noqa: UP007 - a forward reference needs Union
ALL_FAILURE_KINDS = frozenset(FailureKind)


def _count(owner: str, name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{owner} {name}={value!r} must be a whole number from {low} to {high}")
    if not low <= value <= high:
        raise PolicyError(f"{owner} {name}={value!r} must be from {low} to {high}")
    return value


def _duration_json(value: Duration | None) -> str | float | int | None:
    # Keep what the user wrote ("5m") so compiled specs stay readable; timedelta is not JSON.
    from .durations import timedelta_seconds  # here: only a Backoff has durations

    seconds = timedelta_seconds(value)
    return value if seconds is None else seconds


def _finite(x: float) -> bool:
    """math.isfinite without importing math (a KFP task builds a Backoff, rarely a delay)."""
    return x - x == 0  # inf - inf and nan - nan are nan


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
        from .durations import parse_duration  # here: a step without a Backoff never parses one

        first_s = parse_duration(self.first, "Backoff first")
        if first_s <= 0:
            raise PolicyError(f"Backoff first={self.first!r} must be longer than 0s")
        f = self.factor
        if isinstance(f, bool) or not isinstance(f, int | float) or not _finite(f) or f < 1:
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
        import math  # here: the module is loaded only when a delay is computed

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


@dataclass(frozen=True)
class Retry:
    """How a step retries (see the module doc). ``Retry()`` retries nothing.

    ``any``: retries of every failure alike, at once (``Retry(3)``); it excludes the
    per-kind budgets, which opt into the taxonomy. ``contention`` takes a ``Backoff``, an int
    (that many attempts with the default backoff: first 5m, x2, capped at 1h) or None (no
    contention retries); it is always a ``Backoff`` or None afterwards.
    """

    any: int | None = None
    transient: int = 0
    contention: Backoff | int | None = None
    preempted: int = 0
    oom_remediation: bool = False
    timeout: int = 0  # retries after the step ran past its timeout (FailureKind.TIMEOUT)

    def __post_init__(self) -> None:
        if self.any is not None:
            _count("Retry", "any", self.any, 0, MAX_ANY)
            per_kind = [
                name for name, value, default in (
                    ("transient", self.transient, 0), ("contention", self.contention, None), ("preempted", self.preempted, 0),
                    ("timeout", self.timeout, 0),
                ) if value != default
            ]
            if per_kind:
                raise PolicyError(
                    f"Retry(any={self.any}) retries every failure alike; it cannot be combined with "
                    f"{', '.join(f'{n}=' for n in per_kind)}",
                    hint="write Retry(N) for N retries of any failure, or Retry(transient=..., contention=..., "
                    "preempted=...) for a budget per failure kind (FATAL is then never retried)",
                )
        _count("Retry", "transient", self.transient, 0, MAX_TRANSIENT)
        _count("Retry", "timeout", self.timeout, 0, MAX_TRANSIENT)
        _count("Retry", "preempted", self.preempted, 0, MAX_PREEMPTED)
        c = self.contention
        if isinstance(c, bool):
            raise PolicyError(f"Retry contention={c!r} must be a Backoff, a number of attempts or None")
        if isinstance(c, int):
            object.__setattr__(self, "contention", Backoff(attempts=c))
        elif isinstance(c, dict):
            object.__setattr__(self, "contention", Backoff.from_dict(c))
        elif c is not None and not isinstance(c, Backoff):
            raise PolicyError(f"Retry contention={c!r} must be a Backoff, a number of attempts or None")
        if not isinstance(self.oom_remediation, bool):
            raise PolicyError(f"Retry oom_remediation={self.oom_remediation!r} must be True or False")

    @property
    def retries_any(self) -> bool:
        """True for ``Retry(N)``: every failure kind spends one budget, as on Flyte and KFP."""
        return self.any is not None

    @property
    def retries_nothing(self) -> bool:
        """True when no failure is ever retried (``Retry()``, ``Retry(0)``)."""
        b = self.backoff
        return not (
            self.any or self.transient or self.preempted or self.timeout or (b and b.attempts) or self.oom_remediation
        )

    def retried_in_process(self, kind: FailureKind, in_process: frozenset[FailureKind]) -> bool:
        """Whether the shim retries a ``kind`` failure itself, given the kinds the backend leaves to it.

        ``Retry(N)`` is the backend's own retry count: the shim retries in-process only where
        the backend retries nothing itself (every kind is in-process), else it hands every
        failure back to the backend (a Flyte or KFP retry, as a ported ``retries=N`` does).
        """
        if self.retries_any:
            return in_process >= ALL_FAILURE_KINDS
        return kind in in_process

    @property
    def backoff(self) -> Backoff | None:
        """``contention`` with its type narrowed (always a Backoff or None after init)."""
        assert self.contention is None or isinstance(self.contention, Backoff)
        return self.contention

    @property
    def max_retries(self) -> int:
        """Most retries this policy can grant in one step run, all kinds together.

        For backends that retry every failure themselves (KFP ``set_retry``): allow this
        many, and the shim ends the ones the policy would not grant within seconds.
        """
        if self.any is not None:
            return self.any
        b = self.backoff
        return (
            self.transient
            + (b.attempts if b else 0)
            + self.preempted
            + (MAX_OOM_HALVINGS if self.oom_remediation else 0)
            + self.timeout
        )

    def to_dict(self) -> dict[str, Any]:
        b = self.backoff
        return {
            "any": self.any,
            "transient": self.transient,
            "contention": b.to_dict() if b else None,
            "preempted": self.preempted,
            "oom_remediation": self.oom_remediation,
            "timeout": self.timeout,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Retry:
        if not isinstance(data, dict):
            raise PolicyError(f"Retry must be a mapping, got {data!r}")
        unknown = set(data) - {"any", "transient", "contention", "preempted", "oom_remediation", "timeout"}
        if unknown:
            raise PolicyError(f"Retry has no field(s) {sorted(unknown)}")
        return cls(**data)

    # Same names as the other policies in policies.py.
    to_json = to_dict
    from_json = from_dict


# What a step that declares nothing gets: no retries, as flytekit and KFP do by default.
NO_RETRY = Retry()
