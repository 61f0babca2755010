"""A stop marker as read back: which node, why, and what the shim says when it refuses it.

Markers are written and found by the run state (``state.py``, ``StopMarker``); this is the
record a step reads back when its node was stopped earlier in the run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from interlock.core.failure.record import Failure
from interlock.core.run.records import StopMarker


@dataclass(frozen=True)
class Marker:
    kind: StopMarker
    node: str
    run_id: str
    failure: Failure

    def refusal(self) -> Failure:
        """The failure the shim reports when it refuses to run the node again."""
        f = self.failure
        why = {
            StopMarker.FATAL: "a retry cannot fix it",
            StopMarker.EXHAUSTED: "its retry budget is spent",
            StopMarker.STOPPED: "the run was stopped",
        }[self.kind]
        did = "was stopped" if self.kind is StopMarker.STOPPED else f"already failed {f.kind}"
        resume = f"`interlock run ... --resume {self.run_id}`"
        return replace(
            f, reason=(
                f"{did} earlier in run {self.run_id}: {f.reason} (not re-running: {why}; "
                f"fix the cause, then {resume} keeps its checkpoints and finished steps)"
            ),
            hint=f.hint or f"fix the cause, then {resume} (or il.run(..., resume={self.run_id!r}))",
        )
