"""The records a step leaves in its run's state: an ``Attempt`` per try, the node's
``Fragment`` (status, attempts, snapshots, outputs) and the kinds of ``StopMarker``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PolicyError
from interlock.core.base.status import FailureKind, Status

if TYPE_CHECKING:
    from interlock.core.failure.record import Failure


ALL_KINDS = frozenset(FailureKind)


# -- fragments ---------------------------------------------------------------------------------
@dataclass
class Attempt:
    """One attempt of a step, as the shim recorded it."""

    number: int
    started: float
    ended: float
    status: Status  # SUCCEEDED | FAILED | STOPPED
    failure: dict[str, Any] | None = None  # Failure.to_dict(): receipts keep the JSON form
    decision: str | None = None
    delay_s: float = 0.0
    batch_size_factor: float = 1.0
    usage: dict[str, Any] = field(default_factory=dict)  # core/run/usage.AttemptUsage.to_dict()

    def __post_init__(self) -> None:
        if type(self.status) is not Status:  # the shim passes a Status (Status() of one is a lookup)
            self.status = Status(self.status)

    @property
    def duration_s(self) -> float:
        return round(self.ended - self.started, 6)

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "started": self.started,
            "ended": self.ended,
            "duration_s": self.duration_s,
            "status": self.status,
            "failure": self.failure,
            "decision": self.decision,
            "delay_s": self.delay_s,
            "batch_size_factor": self.batch_size_factor,
            **({"usage": self.usage} if self.usage else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attempt:
        started = float(d.get("started", 0.0))
        return cls(
            number=int(d.get("number", 0)),
            started=started,
            ended=float(d.get("ended", started + float(d.get("duration_s", 0.0)))),
            status=Status(d.get("status", Status.FAILED)),
            failure=d.get("failure"),
            decision=d.get("decision"),
            delay_s=float(d.get("delay_s", 0.0)),
            batch_size_factor=float(d.get("batch_size_factor", 1.0)),
            usage=dict(d.get("usage") or {}),
        )

    def failure_record(self) -> Failure | None:
        """The recorded failure, typed; None when there is none or it cannot be read back."""
        if not self.failure:
            return None
        from interlock.core.failure.record import Failure

        try:
            return Failure.from_dict(self.failure)
        except (PolicyError, TypeError, ValueError):
            return None


@dataclass
class Fragment:
    """What the shim recorded about one node in one run: the receipt is merged from these."""

    run_id: str
    node: str
    step: str
    status: Status  # SUCCEEDED | FAILED | CACHED | STOPPED
    fingerprint: str | None = None
    image: str | None = None
    started: float = 0.0
    ended: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    distributed: dict[str, Any] | None = None
    device: dict[str, Any] | None = None  # what the step ran on (core/run/devices.py): GPU billing

    def __post_init__(self) -> None:
        if type(self.status) is not Status:  # the shim passes a Status (Status() of one is a lookup)
            self.status = Status(self.status)

    @property
    def duration_s(self) -> float:
        return round(self.ended - self.started, 6)

    def last_failure(self) -> dict[str, Any] | None:
        failures = [a.failure for a in self.attempts if a.failure]
        return failures[-1] if failures else None

    def failures(self) -> list[Failure]:
        return [f for f in (a.failure_record() for a in self.attempts) if f is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "node": self.node,
            "step": self.step,
            "status": self.status,
            "fingerprint": self.fingerprint,
            "image": self.image,
            "started": self.started,
            "ended": self.ended,
            "attempts": [a.to_dict() for a in self.attempts],
            "snapshots": self.snapshots,
            "facts": self.facts,
            "resources": self.resources,
            "distributed": self.distributed,
            "device": self.device,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, run_id: str, node: str) -> Fragment:
        return cls(
            run_id=d.get("run_id", run_id),
            node=d.get("node", node),
            step=d.get("step", node),
            status=Status(d.get("status", Status.FAILED)),
            fingerprint=d.get("fingerprint"),
            image=d.get("image"),
            started=float(d.get("started", 0.0)),
            ended=float(d.get("ended", 0.0)),
            attempts=[Attempt.from_dict(a) for a in d.get("attempts", [])],
            snapshots=list(d.get("snapshots", [])),
            facts=dict(d.get("facts", {})),
            resources=dict(d.get("resources", {})),
            distributed=d.get("distributed"),
            device=d.get("device"),
        )


# -- markers -----------------------------------------------------------------------------------
class StopMarker(StrEnum):
    """Why a node must not run again in this run (one file per node and kind).

    The shim writes one whenever it decides "do not retry": a backend that retries every
    failure (KFP's ``set_retry``) or a retry in a fresh pod must end in seconds, not rerun.
    """

    FATAL = "fatal"  # it failed FATAL: a backend retry cannot help
    EXHAUSTED = "exhausted"  # its retry budget for that failure kind is spent
    # The run was stopped (SIGTERM, Ctrl-C) while it ran: a backend retry must not restart it
    # behind the user's back; resuming the run clears it.
    STOPPED = "stopped"
