"""``il.finally_`` on the in-process backend: the finally step runs last, with the body's status."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from interlock.core.backends import RunOptions
from interlock.core.bindings import node_inputs
from interlock.core.errors import StepFailed
from interlock.core.finally_ import finally_inputs, run_status
from interlock.core.runstate import RunContext, RunOutcome, StepOutcome
from interlock.core.runtime import execute_step
from interlock.core.spec import PipelineSpec
from interlock.core.status import Status


def run_finally(
    spec: PipelineSpec, run: RunContext, params: dict[str, Any], options: RunOptions, outcome: RunOutcome,
) -> RunOutcome:
    """Run the finally step (if any) after the body; the run fails too if it fails."""
    node = spec.finally_
    if node is None:
        return outcome
    step = spec.step_of(node)
    status = run_status(outcome)
    inputs = finally_inputs(spec, node, node_inputs(spec, node.name, params, {}), status)
    options.emit(node.name, "started", f"finally ({status.status})")
    steps = dict(outcome.steps)
    try:
        result = execute_step(run, step, node.name, inputs, options.functions.get(step.name))
    except StepFailed as exc:
        options.emit(node.name, Status.FAILED, f"{exc.kind}: {exc.reason}")
        steps[node.name] = StepOutcome(Status.FAILED, attempts=exc.attempts, failure=exc.failure.to_dict()
                                       if exc.failure else None)
        error = outcome.error or exc
        return replace(outcome, status=Status.FAILED if outcome.status is Status.SUCCEEDED else outcome.status,
                       steps=steps, error=error)
    options.emit(node.name, Status.SUCCEEDED, "finally")
    steps[node.name] = StepOutcome(Status.SUCCEEDED, attempts=len(result.attempts),
                                   duration_s=round(result.ended - result.started, 6))
    return replace(outcome, steps=steps)
