"""``il.finally_`` on the in-process backend: a ``with il.finally_`` block's finally step as soon
as its block's last step is over (a nested block's before the outer block goes on), each call's
after the body (for the blocks the run reached), then the whole pipeline's, each with its status."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.errors import StepFailed
from interlock.core.base.status import Status
from interlock.core.model.finally_blocks import (
    RunStatus,
    block_gate,
    block_spec,
    finally_inputs,
    handler_runs,
    is_call_finally,
    is_handler,
    reached,
)
from interlock.core.model.pipeline_spec import FinallyBlock, Node, PipelineSpec
from interlock.core.record.outcomes import RunOutcome, Seen, StepOutcome, run_status, settle
from interlock.core.run.bindings import gate_decisions, gate_open, node_inputs
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext


def run_finally(
    spec: PipelineSpec, run: RunContext, params: dict[str, Any], options: RunOptions, outcome: RunOutcome,
    outputs: dict[str, dict[str, Any]] | None = None, early: dict[str, RunOutcome] | None = None,
) -> RunOutcome:
    """Run the finally steps (if any) after the body; the run fails too if one fails. ``early``:
    the blocks' finally steps already run as their block ended, by finally step.

    A block's finally step sees the block's status, settled from the run state (the shim's
    fragments) as the KFP exit task and the Flyte failure node do; it runs once the body is
    over (no later step can read a finally step's outputs, so only the order of side effects
    differs from a cluster, where it starts as soon as its block ends). A block in a sub-pipeline
    call (the call's own finally included) runs only if the il.when block around the call, if
    any, was taken: a sub-workflow or nested DAG that never started runs no finally step."""
    for block in spec.finally_blocks:
        if block.node.name in (early or {}):  # run as its block ended (run_block_finally)
            done = early[block.node.name]  # type: ignore[index]
            outcome.steps[block.node.name] = done.steps[block.node.name]
            if done.error is not None:
                outcome = replace(outcome, error=outcome.error or done.error,
                                  status=Status.FAILED if outcome.status is Status.SUCCEEDED else outcome.status)
            continue
        outcome = _block_finally(spec, block, run, params, options, outcome, outputs or {})
    if spec.finally_ is not None:
        outcome = _run_one(spec, spec.finally_, run, params, options, outcome, run_status(outcome), outputs or {})
    return outcome


def block_ends(spec: PipelineSpec, order: list[Node]) -> dict[str, list[FinallyBlock]]:
    """The ``with il.finally_`` blocks (not a call's own finally) by the node that ends them in
    ``order`` (the plan's), innermost first: their finally steps run right after that node."""
    at = {n.name: i for i, n in enumerate(order)}
    ends: dict[str, list[FinallyBlock]] = {}
    for block in spec.finally_blocks:  # innermost first: a block closes after those nested in it
        if not is_call_finally(spec, block):
            ends.setdefault(max(block.members, key=at.__getitem__), []).append(block)
    return ends


def run_block_finally(
    spec: PipelineSpec, block: FinallyBlock, run: RunContext, params: dict[str, Any], options: RunOptions,
    seen: dict[str, Seen], outputs: dict[str, dict[str, Any]],
) -> RunOutcome:
    """A block's finally step, run as the block ends (what follows it in an outer block waits for
    it, as after Python's inner ``finally:``): the outcome of that step alone."""
    reach = settle(block_spec(spec, block), run.state, seen, gates=gate_decisions(spec, params, outputs))
    return _block_finally(spec, block, run, params, options, RunOutcome(Status.SUCCEEDED, dict(reach.steps)),
                          outputs)


def _block_finally(spec: PipelineSpec, block: FinallyBlock, run: RunContext, params: dict[str, Any],
                   options: RunOptions, outcome: RunOutcome, outputs: dict[str, dict[str, Any]]) -> RunOutcome:
    taken = _taken(spec, block_gate(spec, block), outputs, params)
    if reached(spec, block, outcome.steps) and taken:
        status = run_status(settle(block_spec(spec, block), run.state, None))
        return _run_one(spec, block.node, run, params, options, outcome, status, outputs)
    # listed all the same: behind a closed gate, or not reached (a failure came first)
    outcome.steps[block.node.name] = StepOutcome(Status.NOT_RUN if taken else Status.SKIPPED)
    return outcome


def _taken(spec: PipelineSpec, gate: str | None, outputs: dict[str, dict[str, Any]], params: dict[str, Any]) -> bool:
    try:
        return gate is None or gate_open(spec, gate, outputs, params)
    except (KeyError, AttributeError):  # a condition on a value the run never produced
        return False


def _run_one(spec: PipelineSpec, node: Node, run: RunContext, params: dict[str, Any], options: RunOptions,
             outcome: RunOutcome, status: RunStatus, outputs: dict[str, dict[str, Any]]) -> RunOutcome:
    step = spec.step_of(node)
    steps = dict(outcome.steps)
    if is_handler(spec, node.name) and not handler_runs(status):  # il.on_failure: its scope did not fail
        options.emit(node.name, Status.SKIPPED, f"on failure only ({status.status})")
        steps[node.name] = StepOutcome(Status.SKIPPED)
        return replace(outcome, steps=steps)
    inputs = finally_inputs(spec, node, node_inputs(spec, node.name, params, outputs, missing_as_none=True), status)
    options.emit(node.name, "started", f"finally ({status.status})")
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
