"""A run's outcome: each step's status, the run's, and its first failure (``settle``).

Only the process that watches a run (a backend's parent, a KFP exit task) settles it; a
step's own process never does. ``RunResult`` is what ``il.run`` returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.base.errors import RunFailed, StepFailed, StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.failure.record import Failure
from interlock.core.model.attempts import handled
from interlock.core.model.finally_blocks import RunStatus
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.run.map_items import aggregate, first_failure
from interlock.core.run.records import Fragment
from interlock.core.run.state import RunState


@dataclass
class StepOutcome:
    status: Status
    attempts: int = 0
    cached: bool = False
    failure: dict[str, Any] | None = None  # Failure.to_dict() of the failure that ended the step
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        self.cached = self.cached or self.status is Status.CACHED


@dataclass(frozen=True)
class Seen:
    """What a backend saw of a node it reached; everything else comes from the fragments.

    ``status`` is SUCCEEDED, FAILED or CACHED as the orchestrator saw it. ``error`` is the
    StepFailed the backend caught, when it ran the node in-process. ``shim_ran`` is False
    when the backend knows the task ended without the shim writing its fragment (the shim
    refused a node that a stop marker stops). ``detail`` explains a failure that the shim did
    not record; ``duration_s`` is the backend's wall time, used when there is no fragment.
    """

    status: Status
    error: StepFailed | None = None
    shim_ran: bool = True
    detail: str | None = None
    duration_s: float | None = None


@dataclass
class RunOutcome:
    status: Status  # SUCCEEDED | FAILED | STOPPED
    steps: dict[str, StepOutcome]
    error: RunFailed | None = None
    fragments: dict[str, Fragment] = field(default_factory=dict)

    @property
    def statuses(self) -> dict[str, Status]:
        return {k: v.status for k, v in self.steps.items()}


def gate_closed(spec: PipelineSpec, node: str, gates: Mapping[str, bool]) -> bool:
    """True when an il.when block enclosing ``node`` had a condition that came out false."""
    return any(gates.get(g.id) is False for g in spec.gate_chain(spec.node(node).gate))


def settle(
    spec: PipelineSpec,
    state: RunState,
    seen: Mapping[str, Seen] | None,
    *,
    gates: Mapping[str, bool] | None = None,
    failed: str | None = None,
) -> RunOutcome:
    """Each step's outcome, the run's status and its first failure; one rule for every backend.

    ``seen``: the nodes the backend reached, with what it saw; None when it observed nothing
    (a KFP exit task reads only fragments). ``gates``: each il.when condition the backend
    could evaluate (its condition node produced a value), by gate id. ``failed``: why the
    run failed outside any step, if it did.

    A node the backend reached has the status it saw, with attempts and failure from its
    fragment. A node it did not reach is SKIPPED when an enclosing gate's condition was
    false, else NOT_RUN (an earlier failure stopped the run first).
    """
    gates = gates or {}
    handled_ = handled(spec)
    if seen is None:  # a finally step or an exit task reads fragments only: fold each map's items first
        for node in spec.nodes:
            if node.map is not None:
                aggregate(spec, state, node)
    fragments = state.fragments(n.name for n in spec.nodes)
    steps: dict[str, StepOutcome] = {}
    error: RunFailed | None = None
    for node in spec.nodes:
        frag = fragments.get(node.name)
        saw = (seen or {}).get(node.name)
        if saw is None and seen is None and frag is not None:
            saw = Seen(frag.status)
        if saw is None:
            closed = gate_closed(spec, node.name, gates)
            steps[node.name] = StepOutcome(Status.SKIPPED if closed else Status.NOT_RUN)
            continue
        ran = frag is not None and saw.status is not Status.CACHED
        attempts = len(frag.attempts) if ran and frag else 0
        duration = frag.duration_s if ran and frag else round(saw.duration_s or 0.0, 6)
        if _stopped(saw, frag):  # told to stop: not a failure, and what the run ended with
            steps[node.name] = StepOutcome(Status.STOPPED, attempts=attempts, duration_s=duration)
            if error is None:
                error = saw.error if isinstance(saw.error, StepStopped) else StepStopped(
                    node.name, (frag.facts.get("stopped_by") if frag else None) or saw.detail or "a signal",
                    attempts=max(attempts, 1), pipeline=spec.name,
                    attempt_log=frag.attempts if frag else (),
                    # As the step's own line said it (a task process stopped it: kfp-local).
                    checkpoint=frag.facts.get("checkpoint_at_stop") if frag else None,
                )
                error.pipeline = error.pipeline or spec.name
            continue
        if saw.status is not Status.FAILED:
            steps[node.name] = StepOutcome(saw.status, attempts=attempts, duration_s=duration)
            continue
        failure = _failure_of(state, node.name, frag, saw)
        tries, log = max(attempts, 1), frag.attempts if frag else []
        items = frag.facts.get("map", {}).get("items") if frag is not None else None
        folded = node.map is not None or (frag is not None and "map" in frag.facts)  # a mapped call's body node too
        item = first_failure(state, node.name, items) if folded else None
        if item is not None and item.failures():  # il.map: its first failed item, named as the map
            failure, tries, log = item.failures()[-1], len(item.attempts), item.attempts
        steps[node.name] = StepOutcome(Status.FAILED, attempts=attempts, failure=failure.to_dict(), duration_s=duration)
        if node.name in handled_:  # tried in an il.attempt() block: its fallback handles it, the run goes on
            continue
        if error is None:
            error = (saw.error if item is None else None) or StepFailed(
                node.name, failure.kind, failure.reason, hint=failure.hint, attempts=tries,
                pipeline=spec.name, failure=failure, attempt_log=log,
            )
            if error.pipeline is None:
                error.pipeline = spec.name
    if error is None and failed is not None:
        error = RunFailed(failed, pipeline=spec.name)
    status = Status.SUCCEEDED if error is None else Status.STOPPED if isinstance(error, StepStopped) else Status.FAILED
    return RunOutcome(status, steps, error, fragments)


def _stopped(saw: Seen, frag: Fragment | None) -> bool:
    if saw.status is Status.STOPPED or isinstance(saw.error, StepStopped):
        return True
    return saw.status is Status.FAILED and saw.shim_ran and frag is not None and frag.status is Status.STOPPED


def _failure_of(state: RunState, node: str, frag: Fragment | None, saw: Seen) -> Failure:
    """Why a node the backend saw fail failed: the error in hand, the marker, or the fragment."""
    if saw.error is not None:
        if saw.error.failure is not None:
            return saw.error.failure
        return Failure(saw.error.kind, saw.error.reason, saw.error.hint)
    marker = state.stop_marker(node) if not saw.shim_ran else None
    if marker is not None:  # the shim refused at once: this node gave up earlier in this run
        return marker.refusal()
    # The fragment's failures explain this one only when the shim itself ended the step failed.
    recorded = frag.failures() if frag is not None and saw.shim_ran and frag.status is Status.FAILED else []
    if recorded:
        return recorded[-1]
    return Failure(FailureKind.FATAL, saw.detail or "the task failed before the shim ran (see the backend's log above)")







def run_status(outcome: RunOutcome) -> RunStatus:
    """The body's status from its outcome (``settle``): the same rule on every backend."""
    failed = [n for n, s in outcome.steps.items() if s.status in (Status.FAILED, Status.STOPPED)]
    error = ""
    if outcome.error is not None:
        kind = getattr(outcome.error, "kind", None)
        reason = getattr(outcome.error, "reason", None) or str(outcome.error)
        error = f"{kind}: {reason}" if kind is not None else reason
    return RunStatus(str(outcome.status), failed, error)


def with_finally(spec: PipelineSpec, state: RunState, outcome: RunOutcome, seen: dict[str, Seen],
                 gates: Mapping[str, bool] | None = None) -> RunOutcome:
    """The run's outcome with the finally steps' own (from what the backend saw of them): the run
    fails too if a finally step failed. One the backend never reached is listed all the same:
    skipped when its block is behind a closed gate (``gates``), else not run (a failure came first)."""
    from dataclasses import replace

    from interlock.core.model.finally_blocks import block_gate, block_of, block_spec, reached

    nodes = spec.finally_nodes()
    if not nodes:
        return outcome
    names = {n.name for n in nodes}
    alone = replace(spec, nodes=nodes, gates=(), outputs=(), output_types=(), finally_=None, finally_blocks=())
    own = settle(alone, state, {k: v for k, v in seen.items() if k in names})
    for k, o in own.steps.items():
        block = block_of(spec, k) if k not in seen else None
        gate = block_gate(spec, block) if block is not None else None
        if gate is not None and (gates or {}).get(gate) is False:
            o.status = Status.SKIPPED
        if k in spec.failure_handlers:  # il.on_failure: skipped when its scope (reached) did not fail
            block = block_of(spec, k)
            if block is None:
                failed = outcome.status is Status.FAILED
            else:
                failed = not reached(spec, block, outcome.steps) or settle(
                    block_spec(spec, block), state, None).status is Status.FAILED
            if not failed:
                own.steps[k] = StepOutcome(Status.SKIPPED)
    steps = {**outcome.steps, **own.steps}
    if own.error is None or all(own.steps[k].status is not Status.FAILED for k in names):
        return replace(outcome, steps=steps)
    status = Status.FAILED if outcome.status is Status.SUCCEEDED else outcome.status
    return replace(outcome, status=status, steps=steps, error=outcome.error or own.error)






@dataclass
class RunResult:
    pipeline: str
    run_id: str
    backend: str
    status: Status  # SUCCEEDED | FAILED
    outputs: dict[str, Any]
    steps: dict[str, StepOutcome]
    receipt_path: Path | None
    error: RunFailed | None = None  # StepFailed when a step failed
    maps: dict[str, Any] = field(default_factory=dict)  # mapped node -> fanout.MapReport (failed indices)

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def succeeded(self) -> bool:
        return self.status is Status.SUCCEEDED

    def __getitem__(self, output: str) -> Any:
        return self.outputs[output]
