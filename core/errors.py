"""interlock's small exception hierarchy.

Foreign exceptions are wrapped at the boundary (``raise ... from exc``). Every error
carries a stable ``code`` (for logs, receipts and exit statuses) and whether retrying the
same thing could help (``retryable``), in the spirit of flytekit's ``USER:Recoverable``.
"""

from __future__ import annotations

from typing import Any


class InterlockError(Exception):
    """Base class of every error interlock raises on purpose."""

    code: str = "INTERLOCK"
    retryable: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  hint: {hint}")


class PipelineDefinitionError(InterlockError):
    """A pipeline or step is wired or declared wrongly; raised at build time, before anything runs.

    ``pipeline``, ``step`` and ``port`` say where, when known.
    """

    code = "DEFINITION"

    def __init__(
        self,
        message: str,
        *,
        pipeline: str | None = None,
        step: str | None = None,
        port: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.step = step
        self.port = port
        where = ", ".join(
            f"{k} {v!r}" for k, v in (("pipeline", pipeline), ("step", step), ("port", port)) if v
        )
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


class PolicyError(PipelineDefinitionError):
    """A policy value (resources, retry, cache, checkpoint) is invalid."""

    code = "POLICY"


class CapabilityError(PipelineDefinitionError):
    """The chosen backend cannot express a feature the pipeline uses."""

    code = "CAPABILITY"


class BackendNotFound(InterlockError):
    code = "BACKEND_NOT_FOUND"


class LineageUnavailable(InterlockError):
    """No lineage provider is installed, or the installed one is not set up."""

    code = "LINEAGE_UNAVAILABLE"


class ValidationFailed(InterlockError):
    """Data failed a validation gate. FATAL: the run stops and nothing downstream runs.

    ``report`` is a JSON-able summary (failing columns, checks, example rows) for receipts.
    """

    code = "VALIDATION"

    def __init__(self, message: str, *, report: Any = None, hint: str | None = None) -> None:
        self.report = report
        super().__init__(message, hint=hint or "fix the input data or the schema; nothing was registered")


class CheckpointError(InterlockError):
    """A checkpoint is corrupt, torn or unreadable."""

    code = "CHECKPOINT"


class SerializationError(InterlockError):
    """A value cannot cross a step boundary (unsupported type, unreadable file)."""

    code = "SERIALIZATION"


class StepFailed(InterlockError):
    """A step failed for good: retries exhausted or a FATAL failure.

    Raised by ``il.run``; names the step, the failure kind, the reason, the hint and the
    receipt that records every attempt.
    """

    code = "STEP_FAILED"

    def __init__(
        self,
        step: str,
        kind: str,
        reason: str,
        *,
        hint: str | None = None,
        attempts: int = 1,
        receipt_path: str | None = None,
        pipeline: str | None = None,
    ) -> None:
        self.step = step
        self.kind = kind
        self.reason = reason
        self.attempts = attempts
        self.receipt_path = receipt_path
        self.pipeline = pipeline
        self.retryable = kind in ("TRANSIENT", "CONTENTION", "PREEMPTED")
        msg = f"step {step!r} failed ({kind}) after {attempts} attempt(s): {reason}"
        if receipt_path:
            msg += f"\n  receipt: {receipt_path}"
        super().__init__(msg, hint=hint)
