"""Failure taxonomy and the rule table that classifies an exception escaping a step.

Every failure gets one kind, and the kind decides what the runtime does next (``model/retry.py``):

- TRANSIENT   a flake (NCCL timeout, connection reset, throttling): retry at once, 1-2 times.
- CONTENTION  no capacity now (GPUs, scheduling, quota): retry with exponential backoff.
- FATAL       retrying cannot help (OOM, hardware, driver mismatch, bad config or data).
- PREEMPTED   SIGTERM from a spot reclaim: checkpoint, retry, do not spend the budget.
- TIMEOUT     the step ran past its declared timeout: retried only if ``Retry(timeout=N)``.

Rules that read the message text (CUDA, NCCL, quota, scheduling) only look at exception
types that plausibly carry such a message (``TEXT_ERROR_TYPES``: RuntimeError, OSError and
the cloud/HTTP/Kubernetes client errors): a ``KeyError("user quota exceeded")`` is a bug in
the step, not contention.

The table is ordered: the first rule that matches any exception in the chain (the
exception, then its ``__cause__``/``__context__``, outermost first) wins. Hardware and OOM
rules come before network rules on purpose: a collective that timed out because a peer's
GPU fell off the bus must stop, not retry. Users extend the table with
``register_rule(...)`` (or ``Classifier.add``); their rules go first.

An exception that matches nothing is FATAL. Most unknown errors in training code are
deterministic bugs (a shape mismatch, a KeyError, a bad path); retrying one reruns the
whole step, GPU hours included, to fail the same way. A missed transient costs one manual
rerun; a retried bug costs attempts x step time on every failure. So FATAL is the safe
default, and the hint says how to add a rule for an error that really is transient.

Core never imports an ML or cloud library: foreign exception types (torch, botocore,
requests) are matched by qualified name, never imported.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

from interlock.core.base.errors import InterlockError, PolicyError
from interlock.core.base.status import FailureKind  # defined there so that errors.py can use it too

MAX_MESSAGE_CHARS = 1000
MAX_CHAIN = 32
HALVE_BATCH = "halve_batch"  # Rule/Failure.remediation: the runtime may halve the batch and retry


def failure_kind(value: Any, where: str) -> FailureKind:
    if isinstance(value, FailureKind):
        return value
    try:
        return FailureKind(str(value).upper())
    except ValueError:
        kinds = ", ".join(k.value for k in FailureKind)
        raise PolicyError(f"{where}={value!r} is not a failure kind; use one of {kinds}") from None


class Preempted(InterlockError):
    """Raised by the runtime when SIGTERM arrives (spot reclaim, node drain).

    Classified PREEMPTED: the runtime checkpoints and retries without spending the step's
    retry budget.
    """

    code = "PREEMPTED"
    retryable = True

    def __init__(
        self,
        message: str = "preempted: SIGTERM received (spot reclaim or node drain)",
        *,
        signum: int | None = 15,
        hint: str | None = None,
    ) -> None:
        self.signum = signum
        super().__init__(message, hint=hint)


class StepTimeout(BaseException):
    """The step ran past its declared timeout (raised into it by the runtime shim).

    A ``BaseException``, like ``KeyboardInterrupt``: a training loop's ``except Exception``
    must not swallow it and carry on past the deadline. Classified TIMEOUT.
    """

    default_message = "the step exceeded its timeout"

    def __init__(self, message: str | None = None) -> None:
        # No argument: raised asynchronously into a thread, which can only pass the class.
        super().__init__(message or self.default_message)


# --------------------------------------------------------------------------- matching


def qualified_name(cls: type) -> str:
    """``module.QualName``; bare name for builtins ("ConnectionResetError")."""
    mod, name = getattr(cls, "__module__", ""), getattr(cls, "__qualname__", cls.__name__)
    return name if mod == "builtins" else f"{mod}.{name}"


def _type_names(cls: type) -> set[str]:
    names: set[str] = set()
    for c in cls.__mro__:
        q = qualified_name(c)
        names.add(q)
        if "." not in q:
            names.add(f"builtins.{q}")
    return names


def _loaded_class(name: str) -> type | None:
    """The class ``name`` refers to if its module is already imported; never imports.

    Catches aliases: torch documents ``torch.cuda.OutOfMemoryError`` but the class is
    ``torch.OutOfMemoryError``; if a torch exception exists, torch.cuda is loaded too.
    """
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        obj: Any = sys.modules.get(".".join(parts[:i]))
        if obj is None:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
        return obj if isinstance(obj, type) else None
    return None


def is_named(exc: BaseException, names: set[str]) -> bool:
    if names & _type_names(type(exc)):
        return True
    return any(isinstance(exc, cls) for cls in map(_loaded_class, names) if cls is not None)


def exception_chain(exc: BaseException, limit: int = MAX_CHAIN) -> Iterator[BaseException]:
    """The exception, then what caused it, outermost first (breadth first, no repeats).

    Follows ``__cause__``, ``__context__`` (unless suppressed by ``raise ... from None``)
    and the members of exception groups.
    """
    seen: set[int] = set()
    queue: list[BaseException] = [exc]
    while queue and len(seen) < limit:
        cur = queue.pop(0)
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        if isinstance(cur, BaseExceptionGroup):
            queue.extend(cur.exceptions)
        if cur.__cause__ is not None:
            queue.append(cur.__cause__)
        if cur.__context__ is not None and not cur.__suppress_context__:
            queue.append(cur.__context__)


def safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not break failure handling
        return f"<unprintable {qualified_name(type(exc))}>"


_CREDENTIALS_IN_URL = re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+@")


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    # Messages land in receipts and logs: drop user:password from URLs, bound the size.
    text = _CREDENTIALS_IN_URL.sub("***@", text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more chars]"
