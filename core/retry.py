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

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Union

from .durations import format_duration, parse_duration, timedelta_seconds
from .errors import PolicyError
from .failures import HALVE_BATCH, Failure, FailureKind

if TYPE_CHECKING:
    from datetime import timedelta

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


@dataclass(frozen=True)
class Decision:
    """What to do after one failure.

    ``counts_against_budget`` is True for TRANSIENT and CONTENTION (they spend the step's
    retry budget), False for PREEMPTED and FATAL (OOM remediation has its own limit).
    ``attempt`` is this kind's retry number when ``retry`` is True. ``remediation`` tells
    the runtime what to change before retrying (OOM: batch and gradient-accumulation
    factors, per step and in total since the first try).
    """

    retry: bool
    delay_s: float
    reason: str
    counts_against_budget: bool
    kind: FailureKind = FailureKind.FATAL
    attempt: int = 0
    remediation: dict[str, Any] | None = field(default=None, compare=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "retry": self.retry,
            "delay_s": self.delay_s,
            "reason": self.reason,
            "counts_against_budget": self.counts_against_budget,
            "kind": self.kind.value,
            "attempt": self.attempt,
            "remediation": dict(self.remediation) if self.remediation else None,
        }


def _plural(n: int) -> str:
    return "retry" if n == 1 else "retries"


class RetryTracker:
    """The retry state of one step run; ``decide(failure)`` after each failed attempt.

    ``batch_size`` is the step's starting batch size when the runtime knows it; OOM
    remediation then stops before the batch would drop below 1 and reports the new size.
    """

    def __init__(self, policy: Retry, *, batch_size: int | None = None) -> None:
        if not isinstance(policy, Retry):
            raise PolicyError(f"RetryTracker needs a Retry policy, got {policy!r}")
        if batch_size is not None:
            _count("RetryTracker", "batch_size", batch_size, 1, 2**62)
        self.policy = policy
        self.initial_batch_size = batch_size
        self.batch_size = batch_size
        self.counts: dict[FailureKind, int] = dict.fromkeys(FailureKind, 0)
        self.waited_s = 0.0
        self.halvings = 0
        self.history: list[tuple[Failure, Decision]] = []

    @classmethod
    def replay(
        cls, policy: Retry, failures: Iterable[Failure], *, batch_size: int | None = None
    ) -> RetryTracker:
        """Rebuild the state after ``failures`` (earlier attempts, oldest first)."""
        tracker = cls(policy, batch_size=batch_size)
        for failure in failures:
            tracker.decide(failure)
        return tracker

    def decide(self, failure: Failure) -> Decision:
        if not isinstance(failure, Failure):
            raise TypeError(f"decide() needs a Failure (see classify), got {type(failure).__name__}")
        if self.policy.retries_any:
            decision = self._any(failure)
            if decision.retry:
                self.counts[failure.kind] += 1
            self.history.append((failure, decision))
            return decision
        handler = {
            FailureKind.TRANSIENT: self._transient,
            FailureKind.CONTENTION: self._contention,
            FailureKind.PREEMPTED: self._preempted,
            FailureKind.FATAL: self._fatal,
            FailureKind.TIMEOUT: self._timeout,
        }[failure.kind]
        decision = handler(failure)
        if decision.retry:
            self.counts[failure.kind] += 1
        self.history.append((failure, decision))
        return decision

    def _any(self, f: Failure) -> Decision:
        """``Retry(N)``: every failure spends the one budget and is retried at once."""
        limit = self.policy.any or 0
        n = sum(self.counts.values()) + 1
        if n > limit:
            why = "retries disabled (Retry(0))" if limit == 0 else f"giving up after {limit} {_plural(limit)} of any failure"
            return Decision(False, 0.0, f"{f.kind}: {f.reason}; {why}", True, f.kind)
        if f.remediation == HALVE_BATCH and self.policy.oom_remediation and not (
            self.batch_size is not None and self.batch_size < 2
        ) and self.halvings < MAX_OOM_HALVINGS:
            halved = self._halve(f)
            return replace(halved, reason=f"{halved.reason} ({n}/{limit})", counts_against_budget=True, attempt=n)
        return Decision(True, 0.0, f"{f.kind} {n}/{limit}: {f.reason}; retrying now (Retry({limit}): any failure)", True, f.kind, n)

    def _transient(self, f: Failure) -> Decision:
        limit, n = self.policy.transient, self.counts[FailureKind.TRANSIENT] + 1
        if n <= limit:
            return Decision(True, 0.0, f"TRANSIENT {n}/{limit}: {f.reason}; retrying now", True, f.kind, n)
        why = "retries disabled (Retry(transient=0))" if limit == 0 else f"giving up after {limit} {_plural(limit)}"
        return Decision(False, 0.0, f"TRANSIENT: {f.reason}; {why}", True, f.kind)

    def _timeout(self, f: Failure) -> Decision:
        limit, n = self.policy.timeout, self.counts[FailureKind.TIMEOUT] + 1
        if n <= limit:
            return Decision(True, 0.0, f"TIMEOUT {n}/{limit}: {f.reason}; retrying now", True, f.kind, n)
        why = (
            "not retried (a timeout is retried only with il.Retry(timeout=N))" if limit == 0
            else f"giving up after {limit} {_plural(limit)}"
        )
        return Decision(False, 0.0, f"TIMEOUT: {f.reason}; {why}", True, f.kind)

    def _contention(self, f: Failure) -> Decision:
        b = self.policy.backoff
        if b is None or b.attempts == 0:
            return Decision(False, 0.0, f"CONTENTION: {f.reason}; contention retries disabled", True, f.kind)
        n = self.counts[FailureKind.CONTENTION] + 1
        waited = format_duration(self.waited_s)
        if n > b.attempts:
            why = f"giving up after {b.attempts} {_plural(b.attempts)} (waited {waited})"
            return Decision(False, 0.0, f"CONTENTION: {f.reason}; {why}", True, f.kind)
        delay = b.delay(n)
        if b.max_total_s is not None and self.waited_s + delay > b.max_total_s:
            why = (
                f"giving up: the next wait of {format_duration(delay)} would pass "
                f"max_total {format_duration(b.max_total_s)} (waited {waited})"
            )
            return Decision(False, 0.0, f"CONTENTION: {f.reason}; {why}", True, f.kind)
        self.waited_s += delay
        reason = f"CONTENTION {n}/{b.attempts}: {f.reason}; retrying in {format_duration(delay)}"
        return Decision(True, delay, reason, True, f.kind, n)

    def _preempted(self, f: Failure) -> Decision:
        limit, n = self.policy.preempted, self.counts[FailureKind.PREEMPTED] + 1
        if n <= limit:
            reason = (
                f"PREEMPTED {n}/{limit}: {f.reason}; resuming from the latest checkpoint now "
                "(not counted against the retry budget)"
            )
            return Decision(True, 0.0, reason, False, f.kind, n)
        why = (
            "preemption retries disabled (Retry(preempted=0))" if limit == 0
            else f"giving up after {limit} preemption {_plural(limit)} (Retry(preempted={limit}))"
        )
        return Decision(False, 0.0, f"PREEMPTED: {f.reason}; {why}", False, f.kind)

    def _fatal(self, f: Failure) -> Decision:
        if f.remediation == HALVE_BATCH and self.policy.oom_remediation:
            if self.batch_size is not None and self.batch_size < 2:
                why = "OOM remediation exhausted: the batch size is already 1"
            elif self.halvings >= MAX_OOM_HALVINGS:
                why = f"OOM remediation exhausted after {MAX_OOM_HALVINGS} halvings"
            else:
                return self._halve(f)
            return Decision(False, 0.0, f"FATAL: {f.reason}; {why}", False, f.kind)
        return Decision(False, 0.0, f"FATAL: {f.reason}; not retried", False, f.kind)

    def _halve(self, f: Failure) -> Decision:
        self.halvings += 1
        k = self.halvings
        remediation: dict[str, Any] = {
            "batch_size_factor": 0.5,
            "grad_accum_factor": 2,
            "halvings": k,
            "total_batch_size_factor": 0.5**k,
            "total_grad_accum_factor": 2**k,
        }
        change = "batch size halved"
        if self.batch_size is not None:
            # Floor: the point is to fit in memory; an odd batch loses one sample per step.
            new = self.batch_size // 2
            change = f"batch size {self.batch_size} -> {new}"
            self.batch_size = new
            remediation["batch_size"] = new
        reason = (
            f"FATAL {f.reason}: OOM remediation {k}: {change}, gradient accumulation x2 "
            "(same effective batch); retrying now"
        )
        return Decision(True, 0.0, reason, False, f.kind, k, remediation)


def decide(
    policy: Retry,
    failure: Failure,
    history: Iterable[Failure] = (),
    *,
    batch_size: int | None = None,
) -> Decision:
    """Pure form: the decision for ``failure`` after the earlier ``history`` of this step run."""
    return RetryTracker.replay(policy, history, batch_size=batch_size).decide(failure)


# What a step that declares nothing gets: no retries, as flytekit and KFP do by default.
NO_RETRY = Retry()
