"""The per-task ``retry_policy`` of a TaskFlow task (``retries="airflow"``): a step that failed
with a kind Airflow retries (CONTENTION, PREEMPTED, TIMEOUT) ends its try with ``StepRetry``,
and ``ShimRetryPolicy`` retries it after the backoff delay the shim computed, so the wait holds
no worker slot. Imported when the scheduler parses the DAG file: Airflow only.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk.definitions.retry_policy import RetryDecision, RetryPolicy


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
