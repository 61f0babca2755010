"""Retries by Airflow, decided by the cause: the compile form of ``retries="airflow"``.

In a deployment the shim retries TRANSIENT failures at once in the task (cheap) and leaves
CONTENTION, PREEMPTED and TIMEOUT to Airflow: the task ends with ``StepRetry`` and Airflow's
per-task ``retry_policy`` (``ShimRetryPolicy``) retries it after the step's backoff delay,
so the wait holds no worker slot. A FATAL failure (or a spent budget) ends the task with
AirflowFailException, which Airflow never retries, and the shim's stop marker ends any retry
of the node in seconds. Imported at parse time: Airflow and interlock's model only.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk.definitions.retry_policy import RetryDecision, RetryPolicy

from interlock.core.model.spec import StepSpec


class StepRetry(Exception):
    """A step failed with a kind that Airflow retries; ``delay_s``: the shim's backoff for it."""

    def __init__(self, kind: str, reason: str, delay_s: float = 0.0):
        super().__init__(f"{kind}: {reason}")
        self.kind, self.reason, self.delay_s = kind, reason, delay_s


class ShimRetryPolicy(RetryPolicy):
    """Retry a ``StepRetry`` after the delay the shim computed; fall back to Airflow's own rule
    for anything else (a worker that died before the step ran)."""

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int, context: Any = None) -> RetryDecision:
        if isinstance(exception, StepRetry):
            return RetryDecision.retry(delay=timedelta(seconds=exception.delay_s),
                                       reason=f"interlock: {exception.kind} is retried by Airflow")
        return RetryDecision.default()

    def serialize(self) -> dict[str, Any]:
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> ShimRetryPolicy:
        return cls()


def retry_settings(step: StepSpec, policy: bool) -> dict[str, Any]:
    """The task's retry arguments: as many tries as the step's policy grants, the contention
    backoff as Airflow's exponential backoff (the delay of each try comes from the policy)."""
    r = step.retry
    kw: dict[str, Any] = {"retries": r.max_retries}
    b = r.wait if r.retries_any else r.backoff  # Retry(N, wait=...): the waits between its N retries
    if b is not None and b.attempts:
        kw.update(retry_delay=timedelta(seconds=b.first_s), max_retry_delay=timedelta(seconds=b.max_delay_s))
        if b.factor > 1:
            kw["retry_exponential_backoff"] = float(b.factor)
    if policy:
        kw["retry_policy"] = ShimRetryPolicy()
    return kw
