"""What the shim decides after a failure: ``Decision``, ``RetryTracker`` and ``decide``.

The policy itself (``Retry``) is ``core/model/retry.py``; see that module's doc.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from interlock.core.base.durations import format_duration
from interlock.core.base.errors import PolicyError
from interlock.core.base.status import FailureKind
from interlock.core.failure.record import Failure
from interlock.core.failure.taxonomy import HALVE_BATCH
from interlock.core.model.retry import MAX_OOM_HALVINGS, Retry, _count


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
        w = self.policy.wait
        if w is None:
            return Decision(True, 0.0, f"{f.kind} {n}/{limit}: {f.reason}; retrying now (Retry({limit}): any failure)",
                            True, f.kind, n)
        delay = w.delay(n)
        if w.max_total_s is not None and self.waited_s + delay > w.max_total_s:
            why = (f"giving up: the next wait of {format_duration(delay)} would pass max_total "
                   f"{format_duration(w.max_total_s)} (waited {format_duration(self.waited_s)})")
            return Decision(False, 0.0, f"{f.kind}: {f.reason}; {why}", True, f.kind)
        self.waited_s += delay
        return Decision(True, delay, f"{f.kind} {n}/{limit}: {f.reason}; retrying in {format_duration(delay)} "
                        f"(Retry({limit}): any failure)", True, f.kind, n)

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
