"""A step that returned but whose outputs could not be written: failed, and said why.

For a backend that writes a step's outputs after the shim returned (outside the attempt, so a
value that cannot cross is not retried): the fragment's last attempt is marked failed, and the
failure's reason names the value and why, not only the rule's generic reason.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from interlock.core.base.errors import StepFailed
from interlock.core.base.status import FailureKind, Status
from interlock.core.failure.rules import default_classifier
from interlock.core.run.redact import Redactor
from interlock.core.run.state import RunContext


def output_failed(run: RunContext, step: Any, node: str, exc: BaseException) -> StepFailed:
    """The step ran, but its outputs could not be written: the step failed (its fragment and
    the receipt say so), classified like any failure (a full disk is FATAL with its hint)."""
    classified = Redactor().fields((run.classifier or default_classifier).classify(exc))
    # The rule's reason is generic ("a value cannot cross the step boundary"): add which value and why.
    detail = f": {classified.message}" if classified.message and classified.message not in classified.reason else ""
    failure = replace(
        classified, reason=f"its outputs could not be written after it returned: {classified.reason}{detail}",
        kind=classified.kind if classified.kind is FailureKind.FATAL else FailureKind.FATAL,
    )
    state = run.state
    frag = state.read_fragment(node)
    if frag is not None:
        if frag.attempts:
            last = frag.attempts[-1]
            last.status, last.failure, last.decision = Status.FAILED, failure.to_dict(), "output write failed: not retried"
        state.write_fragment(replace(frag, status=Status.FAILED, ended=run.clock()))
    return StepFailed(
        node, failure.kind, failure.reason, hint=failure.hint, attempts=len(frag.attempts) if frag else 1,
        pipeline=run.pipeline, failure=failure, attempt_log=frag.attempts if frag else (),
    )
