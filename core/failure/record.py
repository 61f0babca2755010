"""``Failure``: the classification of one exception, as receipts and markers record it.

Made when a step fails, or read back from a recorded fragment or marker (``il.Failure``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from interlock.core.base.errors import PolicyError
from interlock.core.base.status import FailureKind
from interlock.core.failure.taxonomy import failure_kind


@dataclass(frozen=True)
class Failure:
    """The classification of one exception, JSON-able for receipts and markers.

    ``exc_type`` and ``message`` describe the exception in the chain that the rule matched
    (the root cause when a wrapper was raised ``from`` it); ``remediation`` is set when the
    runtime may change something and retry (``"halve_batch"`` for CUDA OOM).
    """

    kind: FailureKind
    reason: str
    hint: str | None = None
    rule: str = "unclassified"
    exc_type: str = ""
    message: str = ""
    remediation: str | None = None
    # The step's traceback, interlock's and the orchestrator's frames trimmed (tracebacks.py);
    # not part of what makes two failures the same.
    traceback: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", failure_kind(self.kind, "Failure.kind"))

    def to_dict(self) -> dict[str, Any]:
        data = {
            "kind": self.kind.value,
            "reason": self.reason,
            "hint": self.hint,
            "rule": self.rule,
            "exc_type": self.exc_type,
            "message": self.message,
            "remediation": self.remediation,
        }
        if self.traceback:
            data["traceback"] = self.traceback
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Failure:
        """Read a recorded failure back; fields it does not know are ignored.

        Failures are machine-written (receipts, markers): a receipt from a newer interlock
        must still replay, so unknown fields are skipped rather than refused.
        """
        if not isinstance(data, dict) or "kind" not in data or "reason" not in data:
            raise PolicyError(f"a recorded failure needs at least kind and reason, got {data!r}")
        known = {"kind", "reason", "hint", "rule", "exc_type", "message", "remediation", "traceback"}
        return cls(**{k: v for k, v in data.items() if k in known})
