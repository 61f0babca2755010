"""Retry(N, wait=il.Backoff(...)): a step that fails twice (any failure, a FATAL one too) and
succeeds on its third attempt, waiting with backoff in between (issue 31 item 7). Attempts are
counted in a file (``$INTERLOCK_TEST_ATTEMPTS``): a backend retry may run in a new process."""

from __future__ import annotations

import os
from pathlib import Path

import interlock as il

ATTEMPTS = "INTERLOCK_TEST_ATTEMPTS"
WAIT = il.Backoff(first="1s", factor=2.0, max_delay="5s")  # whole seconds: KFP's backoff_duration


@il.step(retry=il.Retry(2, wait=WAIT))
def flaky(x: int) -> int:
    counter = Path(os.environ[ATTEMPTS])
    n = len(counter.read_text().splitlines()) + 1 if counter.exists() else 1
    with counter.open("a") as f:
        f.write(f"{n}\n")
    if n <= 2:
        raise ValueError(f"bad config on attempt {n}")  # FATAL: Retry(N) retries it anyway
    return x * 2


@il.pipeline(name="retry-wait")
def retry_wait(x: int = 21) -> int:
    return flaky(x=x)
