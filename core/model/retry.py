"""Retry policy (``Retry``, ``Backoff``) and the decision the runtime shim takes after a failure.

The shim runs the same decision on every backend, so a step retries the same way on Flyte,
on KFP and locally. A step that declares nothing is never retried (as a flytekit task with
``retries=0`` or a KFP task without ``set_retry``). Two forms opt in:

- ``Retry(3)`` (or ``@il.step(retry=3)``): three retries of ANY failure, at once; the
  literal port of flytekit's ``retries=3`` and KFP's ``set_retry(3)``. ``Retry(3,
  wait=Backoff(first="30s", factor=2, max_delay="10m"))`` waits between them (KFP's
  ``set_retry`` backoff, Flyte 2's ``RetryStrategy(backoff=...)``, Airflow's
  ``retry_exponential_backoff``); ``max_total`` still bounds the sum of the waits.
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

from interlock.core.base.errors import PolicyError
from interlock.core.base.status import FailureKind

if TYPE_CHECKING:
    from datetime import timedelta

    from interlock.core.model.backoff import Backoff



__all__ = ["Retry", "MAX_OOM_HALVINGS", "NO_RETRY"]

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
    # Retry(N, wait=Backoff(first="30s")): the waits between Retry(N)'s retries (Flyte 2's
    # RetryStrategy backoff, Airflow's retry_exponential_backoff); N counts them.
    wait: Backoff | None = None

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
        if c is not None:
            self._check_contention(c)
        if not isinstance(self.oom_remediation, bool):
            raise PolicyError(f"Retry oom_remediation={self.oom_remediation!r} must be True or False")
        if self.wait is not None:
            self._check_wait(self.wait)

    def _check_wait(self, w: Any) -> None:
        from dataclasses import replace

        from interlock.core.model.backoff import Backoff

        if self.any is None:
            raise PolicyError(
                f"Retry(wait={w!r}) shapes the waits between the retries of Retry(N), which it lacks",
                hint="write Retry(3, wait=il.Backoff(first='30s')) for three retries of any failure with backoff; "
                "the per-kind budgets wait with contention=il.Backoff(...)",
            )
        if isinstance(w, dict):
            w = Backoff.from_dict(w)
        if not isinstance(w, Backoff):
            raise PolicyError(f"Retry wait={w!r} must be an il.Backoff", hint="Retry(3, wait=il.Backoff(first='30s'))")
        # N is the count: the Backoff's own attempts would be a second one.
        object.__setattr__(self, "wait", replace(w, attempts=self.any))

    def _check_contention(self, c: Any) -> None:
        from interlock.core.model.backoff import Backoff

        if isinstance(c, bool):
            raise PolicyError(f"Retry contention={c!r} must be a Backoff, a number of attempts or None")
        if isinstance(c, int):
            object.__setattr__(self, "contention", Backoff(attempts=c))
        elif isinstance(c, dict):
            object.__setattr__(self, "contention", Backoff.from_dict(c))
        elif not isinstance(c, Backoff):
            raise PolicyError(f"Retry contention={c!r} must be a Backoff, a number of attempts or None")

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
            # With waits, a backend that leaves backoffs to the shim (CONTENTION in process: Flyte
            # 1 has no retry backoff) leaves these to it too; KFP's set_retry waits natively.
            return in_process >= ALL_FAILURE_KINDS or (self.wait is not None and FailureKind.CONTENTION in in_process)
        return kind in in_process

    @property
    def backoff(self) -> Backoff | None:
        """``contention`` with its type narrowed (always a Backoff or None after init)."""
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
            **({"wait": self.wait.to_dict()} if self.wait is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Retry:
        if not isinstance(data, dict):
            raise PolicyError(f"Retry must be a mapping, got {data!r}")
        unknown = set(data) - {"any", "transient", "contention", "preempted", "oom_remediation", "timeout", "wait"}
        if unknown:
            raise PolicyError(f"Retry has no field(s) {sorted(unknown)}")
        return cls(**data)

    # Same names as the other policies in policies.py.
    to_json = to_dict
    from_json = from_dict


# What a step that declares nothing gets: no retries, as flytekit and KFP do by default.
NO_RETRY = Retry()
