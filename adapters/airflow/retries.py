"""Retries by Airflow, decided by the cause: the compile form of ``retries="airflow"``.

In a deployment the shim retries TRANSIENT failures at once in the task (cheap) and leaves
CONTENTION, PREEMPTED and TIMEOUT to Airflow: the task ends with ``StepRetry`` and Airflow's
per-task ``retry_policy`` (``retry_policy.ShimRetryPolicy``) retries it after the step's backoff
delay, so the wait holds no worker slot. A FATAL failure (or a spent budget) ends the task with
AirflowFailException, which Airflow never retries, and the shim's stop marker ends any retry
of the node in seconds. Compile time: the DAG description holds these arguments (``describe.py``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from interlock.core.model.spec import StepSpec


def retry_settings(step: StepSpec, policy: bool) -> dict[str, Any]:
    """The task's retry arguments: as many tries as the step's policy grants, the contention
    backoff as Airflow's exponential backoff (the delay of each try comes from the policy);
    ``policy``: with the ``retry_policy`` instance (imports Airflow)."""
    r = step.retry
    kw: dict[str, Any] = {"retries": r.max_retries}
    b = r.wait if r.retries_any else r.backoff  # Retry(N, wait=...): the waits between its N retries
    if b is not None and b.attempts:
        kw.update(retry_delay=timedelta(seconds=b.first_s), max_retry_delay=timedelta(seconds=b.max_delay_s))
        if b.factor > 1:
            kw["retry_exponential_backoff"] = float(b.factor)
    if policy:
        from .retry_policy import ShimRetryPolicy

        kw["retry_policy"] = ShimRetryPolicy()
    return kw
