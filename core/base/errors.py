"""interlock's small exception hierarchy.

Foreign exceptions are wrapped at the boundary (``raise ... from exc``). Every error
carries a stable ``code`` (for logs, receipts and exit statuses) and whether retrying the
same thing could help (``retryable``), in the spirit of flytekit's ``USER:Recoverable``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from typing import Any

from interlock.core.base.status import FailureKind


class InterlockError(Exception):
    """Base class of every error interlock raises on purpose."""

    code: str = "INTERLOCK"
    retryable: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self._message = message
        self.hint = hint
        super().__init__(message)

    @property
    def message(self) -> str:
        return self._message

    def __str__(self) -> str:
        # Computed, not frozen into args: a field set later (a receipt path) shows up.
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


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
        self.more: tuple[PipelineDefinitionError, ...] = ()  # further mistakes found in the same build
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


class RunIdError(PipelineDefinitionError):
    """A run id breaks the naming rule, or names no run to resume: a usage error (CLI exit 2)."""

    code = "RUN_ID"


class RecordError(InterlockError):
    """A run's record on disk (its receipt, its recorded parameters) is not what interlock
    wrote: edited, truncated or from elsewhere. Names the file."""

    code = "RECORD"


class RunInProgress(InterlockError):
    """Another process is running a run with this id in the same work directory."""

    code = "RUN_IN_PROGRESS"


class WatchError(InterlockError):
    """``interlock watch`` cannot evaluate a trigger: its state file is damaged, a data
    location cannot be listed, a drift statistic or the champion's training data cannot be
    read. Names the trigger, the file or the URI."""

    code = "WATCH"
    retryable = True  # a listing or a registry may answer next time; a damaged state file says so itself


class LineageUnavailable(InterlockError):
    """No lineage provider is installed, or the installed one is not set up."""

    code = "LINEAGE_UNAVAILABLE"


class MetricsUnavailable(InterlockError):
    """A metrics exporter is configured (INTERLOCK_PUSHGATEWAY...) but cannot be loaded or
    its setting is malformed."""

    code = "METRICS_UNAVAILABLE"


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


class RunFailed(InterlockError):
    """A run did not succeed; raised by ``il.run``.

    ``StepFailed`` (a subclass) names the step that failed. This class itself is raised when
    a run failed outside any step: the orchestrator gave up before, between or after the
    steps (kfp could not schedule the pipeline, flytekit failed to assemble the outputs).
    """

    code = "RUN_FAILED"

    def __init__(
        self, reason: str, *, hint: str | None = None, receipt_path: str | None = None, pipeline: str | None = None,
    ) -> None:
        self.reason = reason
        self.receipt_path = receipt_path
        self.pipeline = pipeline
        super().__init__(reason, hint=hint)

    def headline(self) -> str:
        return f"pipeline {self.pipeline!r} failed: {self.reason}" if self.pipeline else f"the run failed: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields: rebuild from the instance's state, not from args (a worker
        # process may hand the error back to its parent).
        return (_restore, (type(self), dict(self.__dict__)))

    @property
    def message(self) -> str:
        msg = self.headline()
        if self.receipt_path:
            msg += f"\n  receipt: {self.receipt_path}"
        return msg


class StepFailed(RunFailed):
    """A step failed for good: retries exhausted or a FATAL failure.

    Raised by ``il.run``; names the step (its node), the failure kind, the reason, the hint
    and the receipt that records every attempt. Fields set by the runtime shim:

    - ``failure``: the classified failure (rule, exception type, message, remediation);
    - ``attempt_log``: the attempts of this execution of the step;
    - ``backend_should_retry``: the failure kind allows a retry that the shim left to the
      backend (KFP ``set_retry``, a Flyte recoverable error). Not the same as ``retryable``,
      which says whether retrying a failure of this kind could help at all.
    """

    code = "STEP_FAILED"

    def __init__(
        self,
        step: str,
        kind: FailureKind | str,
        reason: str,
        *,
        hint: str | None = None,
        attempts: int = 1,
        receipt_path: str | None = None,
        pipeline: str | None = None,
        failure: Any = None,  # the failure.record.Failure that ended the step
        attempt_log: Sequence[Any] = (),  # its run.state.Attempt records
        backend_should_retry: bool = False,
    ) -> None:
        self.step = step
        self.kind = kind if isinstance(kind, FailureKind) else FailureKind(str(kind).upper())
        self.attempts = attempts
        self.failure = failure
        self.attempt_log: tuple[Any, ...] = tuple(attempt_log)
        self.backend_should_retry = backend_should_retry
        self.retryable = self.kind.retryable
        # The shim's redactor (its text method): what prints this failure's own exception
        # (``--debug``'s full traceback) masks the step's secrets with it.
        self.redact_text: Callable[[str], str] | None = None
        super().__init__(reason, hint=hint, receipt_path=receipt_path, pipeline=pipeline)

    def headline(self) -> str:
        return f"step {self.step!r} failed ({self.kind}) after {self.attempts} attempt(s): {self.reason}"


class StepStopped(StepFailed):
    """The run was told to stop (SIGTERM, Ctrl-C) while this step ran; raised by ``il.run``.

    Not a failure of the step's code and never retried in this run: the step checkpointed
    first when it has a checkpoint policy, its status is STOPPED, and the run can be resumed.
    ``signal`` names the signal ("SIGTERM", "SIGINT"); ``exit_code`` is what a shell expects
    from a process ended by it (143, 130). ``checkpoint`` is the id committed before stopping.
    """

    code = "STOPPED"

    def __init__(
        self,
        step: str,
        signal: str,
        *,
        attempts: int = 1,
        checkpoint: str | None = None,
        receipt_path: str | None = None,
        pipeline: str | None = None,
        attempt_log: Sequence[Any] = (),  # its run.state.Attempt records
    ) -> None:
        self.signal = signal
        self.checkpoint = checkpoint
        saved = f"checkpoint {checkpoint} committed" if checkpoint else "no checkpoint taken"
        super().__init__(
            step, FailureKind.FATAL, f"stopped by {signal} ({saved})",
            hint="resume the run: interlock run ... --resume <run id>", attempts=attempts,
            receipt_path=receipt_path, pipeline=pipeline, attempt_log=attempt_log,
        )
        self.retryable = False

    @property
    def exit_code(self) -> int:
        try:
            return 128 + int(signal.Signals[self.signal])
        except KeyError:
            return 143

    def headline(self) -> str:
        return f"step {self.step!r} {self.reason}"


def _restore(cls: type[RunFailed], state: dict[str, Any]) -> RunFailed:
    err = cls.__new__(cls)
    Exception.__init__(err, state.get("reason", ""))
    err.__dict__.update(state)
    return err


class Skip(InterlockError):
    """Raised inside a step to skip it (Airflow's ``AirflowSkipException``, a short-circuit):
    the step ends ``skipped``, not failed and never retried, with ``why`` in its receipt.
    What reads its outputs is skipped too under the default join rule, and runs (reading
    None) under ``run_if="any_succeeded"``/``"one_succeeded"``/``"all_done"``. The step
    declares it: ``@il.step(may_skip=True)``, so a backend can render a skip-tolerant join."""

    code = "SKIPPED"

    def __init__(self, why: str = "") -> None:
        self.why = why
        super().__init__(why or "the step skipped itself")


class StepSkipped(InterlockError):
    """What the runtime shim raises to its backend when a step raised ``il.Skip``: the node's
    fragment says ``skipped`` and ``why``. Not a failure: no run fails for it."""

    code = "STEP_SKIPPED"

    def __init__(self, step: str, why: str) -> None:
        self.step, self.why = step, why
        super().__init__(f"step {step!r} skipped itself: {why}" if why else f"step {step!r} skipped itself")
