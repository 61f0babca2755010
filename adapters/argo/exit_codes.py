"""The task entry's exit code per failure kind, which the compiled ``retryStrategy.expression``
reads as ``lastRetry.exitCode``: Argo then retries only what interlock says a retry can fix,
and a FATAL step (or one whose budget the shim spent) gets no retry pod at all.

1 stays Python's own crash code and 128+N a signal's (a stop, SIGTERM = 143), so the codes
sit in a range of their own. None existed in core before: the KFP and Flyte tasks exit 1 and
let their backends retry everything, closing the gap with stop markers.
"""

from __future__ import annotations

from interlock.core.base.status import FailureKind

GAVE_UP = 80  # FATAL, or a retryable kind whose budget is spent: never retried
BY_KIND = {
    FailureKind.TRANSIENT: 81,
    FailureKind.CONTENTION: 82,
    FailureKind.PREEMPTED: 83,
    FailureKind.TIMEOUT: 84,
}


def exit_code(kind: FailureKind, backend_should_retry: bool) -> int:
    return BY_KIND[kind] if backend_should_retry and kind in BY_KIND else GAVE_UP


def retry_expression(kinds: frozenset[FailureKind]) -> str:
    """Retry an attempt that ended with one of ``kinds``' codes, or that Kubernetes ended
    (``Error``: a node lost to a spot reclaim, an evicted pod)."""
    codes = ", ".join(str(BY_KIND[k]) for k in sorted(kinds, key=lambda k: BY_KIND[k]))
    return f"lastRetry.status == 'Error' || asInt(lastRetry.exitCode) in [{codes}]"
