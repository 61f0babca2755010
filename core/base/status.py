"""The two vocabularies of what happened in a run: a ``Status`` and a ``FailureKind``.

Both are ``str`` enums: they compare equal to their values (``Status.SKIPPED == "skipped"``)
and serialize to JSON as plain strings, so receipts and fragments keep their format. This
module imports nothing from interlock, so errors, failures and the run state can all use it.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What happened to a run, a step or one attempt of a step."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # behind an il.when block whose condition was false
    CACHED = "cached"  # served from a cache: the step's code did not run
    NOT_RUN = "not-run"  # never reached: an earlier failure stopped the run first
    # Told to stop (SIGTERM, Ctrl-C) while it ran: not a failure of its code and never retried
    # in this run; it checkpointed first if it has a policy, and the run can be resumed.
    STOPPED = "stopped"
    # An attempt that started and never reported an end: its process was killed (SIGKILL, an
    # evicted pod, a lost node) or, read while the run is live, it is still running.
    KILLED = "killed"

    @property
    def done(self) -> bool:
        """The step produced its outputs (ran or came from the cache)."""
        return self in (Status.SUCCEEDED, Status.CACHED)


class FailureKind(StrEnum):
    """A str: ``FailureKind.FATAL == "FATAL"``, and it serializes to JSON as such."""

    TRANSIENT = "TRANSIENT"
    CONTENTION = "CONTENTION"
    FATAL = "FATAL"
    PREEMPTED = "PREEMPTED"
    # The step ran past its declared timeout. Its own kind, not TRANSIENT: a step that was too
    # slow once is usually too slow again, so it is retried only as often as
    # ``Retry(timeout=N)`` allows (default 0), each retry counted against the budget like a
    # Flyte task timeout counts against ``retries``.
    TIMEOUT = "TIMEOUT"

    @property
    def retryable(self) -> bool:
        return self is not FailureKind.FATAL
