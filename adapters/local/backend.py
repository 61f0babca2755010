"""In-process orchestration of a PipelineSpec through the runtime shim."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from interlock.core.backend.failure_scope import Downstream
from interlock.core.backend.plan import lower
from interlock.core.backend.protocol import BackendOptions, Capabilities, RunOptions
from interlock.core.base.errors import SerializationError, StepFailed, StepSkipped, StepStopped
from interlock.core.base.status import Status
from interlock.core.model.attempts import Tries, attempt_spec, fallback_inputs, fallback_of
from interlock.core.model.failure_policy import CONTINUE
from interlock.core.model.joins import AFTER_FAILURE, READS_MISSING, join_decision, rule_of
from interlock.core.model.pipeline_spec import FinallyBlock, PipelineSpec
from interlock.core.model.spec import StepSpec
from interlock.core.model.submaps import outermost
from interlock.core.model.values import read_value, value_hash, write_value
from interlock.core.record.outcomes import RunResult, Seen, run_status, settle
from interlock.core.record.receipt import assemble_receipt, prefetch_git_info
from interlock.core.run.bindings import (
    gate_decisions,
    gate_open,
    node_inputs,
    pipeline_output,
)
from interlock.core.run.cache import LocalCache, cache_key
from interlock.core.run.env import state_dir_of
from interlock.core.run.output_failure import output_failed
from interlock.core.run.runtime import execute_step, record_cache_hit
from interlock.core.run.state import RunContext

from .distributed import run_distributed
from .fanout import run_map
from .finally_run import block_ends, run_block_finally, run_finally
from .submap import CallMap

NATIVE = "native"


class LocalBackend:
    name = "local"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name,
            description="in-process runner; the reference implementation of the runtime contract",
            features={
                "run": NATIVE,
                "resume": "native: stop markers cleared, checkpoints and cache kept, steps that "
                "succeeded with the same code and inputs are not re-run",
                "gpu": "emulated: requested in the spec; the step runs on whatever devices this host has",
                "accelerator": "emulated: recorded in the receipt, not scheduled",
                "shared_memory": "emulated: ignored (no container)",
                "node_selector": "emulated: ignored (no scheduler)",
                "tolerations": "emulated: ignored (no scheduler)",
                "interruptible": (
                    "emulated: recorded only; SIGTERM or Ctrl-C stops the run (the step checkpoints first if it "
                    "has a checkpoint policy), exit 143/130 with a receipt; no preemption outside a cluster"
                ),
                "timeout": (
                    "native (shim: SIGALRM on the main thread; off it, a watchdog thread that stops the step at "
                    "its next Python instruction, after any blocking call returns)"
                ),
                "retry.transient": "native (shim)",
                "retry.contention_backoff": "native (shim, exponential backoff)",
                "retry.any_backoff": "native (shim, exponential backoff between Retry(N)'s retries)",
                "retry.preempted": "native (shim, outside the retry budget)",
                "retry.fatal_stop": "native (shim)",
                "cache": "native (core cache keys, directory store)",
                "checkpoint": "native (local directory or S3 store)",
                "gates": NATIVE,
                "condition.expression": "native (evaluated in-process)",
                "condition.or": "native (evaluated in-process)",
                "branch.chain": "native (evaluated in-process)",
                "branch.value": "native (the value of the branch that ran)",
                "map": "native (threads, at most `concurrency` items at once; each item through the shim)",
                "map.tolerate": "native (shim: failed items are None, their indices in RunResult.maps)",
                "map.zip": "native (element i of each list to its input; lists of different lengths fail the map)",
                "map.fields": "native (each item's fields to the inputs of their names; a missing field fails the map)",
                "map.subpipeline": (
                    "native (the body once per item on threads, at most `concurrency` at once; each body step "
                    "runs as <call>.<step>[i], its outputs gathered into lists)"
                ),
                "fan_in": NATIVE,
                "finally": "native (runs last, with the body's il.RunStatus)",
                "subpipeline": "native (the inner steps run as steps named <call>.<step>)",
                "subpipeline.cache": "unsupported as a unit: the inner steps cache one by one",
                "finally.block": "native (as the block ends, for each block the run reached, with the block's status)",
                "subpipeline.finally": "native (after the body, for each call the run reached, with the call's status)",
                "secrets": "emulated: read from the environment variable each Secret names",
                "labels": "emulated: recorded in the receipt",
                "queue": "emulated: recorded in the receipt (no Kueue locally)",
                "distributed": (
                    "emulated: nnodes x nproc_per_node local rank processes on this host (env:// rendezvous, "
                    "the step's backend; gloo on CPU), each through the shim; the group is relaunched by the "
                    "step's Retry policy, never one rank alone"
                ),
                "trigger.cron": "emulated: `interlock watch --backend local` evaluates it and starts runs here",
                "trigger.every": "emulated: `interlock watch --backend local` evaluates it and starts runs here",
                "trigger.data": "emulated: `interlock watch --backend local` evaluates it and starts runs here",
                "trigger.drift": "emulated: `interlock watch --backend local` evaluates it and starts runs here",
                "failure_policy.stop": "native (steps run one at a time in plan order; nothing starts after a failure)",
                "failure_policy.continue": "native (in plan order, every step that does not depend on a failure)",
                "on_failure": "native (after its scope, only if the scope failed; skipped otherwise)",
                "join.run_if": "native (the run loop decides from how each upstream ended)",
                "skip": "native (il.Skip ends the step skipped; a map's item is None in the gathered list)",
                "finally.block.reads_output": "native (None for an output the body never produced)",
                "types.model_files": "native (a file field of a dataclass or pydantic model moves as a folder "
                "beside the model's value.json)",
                "fallback": "native (il.attempt(): a failed step ends its block and the run goes on with the "
                "fallback block, handed the attempt's il.RunStatus)",
                "finally.block.nested": "native (a block's finally step as the block ends, the inner one first; the "
                "outer block's status covers the inner block and its finally step)",
            },
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        out = Path(out)
        path = out if out.suffix == ".json" else out / f"{spec.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(spec.dumps(indent=2))
        return [path]

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        started = time.time()
        prefetch_git_info(spec)  # the receipt takes the code as the run starts (git, if needed, in a thread)
        run = RunContext(spec.name, options.run_id, self.name, state_dir_of(options.run_dir), sleeper=options.sleeper,
                         checkpoint_root=options.checkpoint_store)
        attempt = len(run.state.resumes())  # 0 for a new run; each resume (a reused id) opens another
        cache = LocalCache(options.cache_dir)
        typed_params = {
            p.name: resolve_param(params[p.name], p.type) for p in spec.params if p.name in params
        }
        outputs: dict[str, dict[str, Any]] = {}
        seen: dict[str, Seen] = {}
        maps: dict[str, Any] = {}
        failed = halted = False
        plan = lower(spec)
        # failure_policy="continue": after a failure, what does not depend on it still runs.
        downstream = Downstream(plan) if spec.failure_policy == CONTINUE else None
        # In plan order (core/backend/plan.py): each il.when and il.finally_ block whole, as the
        # other backends run them.
        order = plan.nodes()
        ends = block_ends(spec, order)  # a block's finally step runs as the block ends, nested ones first
        early: dict[str, Any] = {}
        tries = Tries(spec)  # il.attempt() blocks: which failed
        mapped_calls: set[str] = set()  # il.map over a sub-pipeline: run whole, at its first node
        for node in [item for n in order for item in (n, *ends.get(n.name, ()))]:
            if isinstance(node, FinallyBlock):  # whatever failed in it, as Python's `finally:`
                done = early[node.node.name] = run_block_finally(spec, node, run, typed_params, options, seen,
                                                                 outputs)
                if done.error is not None:
                    failed, halted = True, halted or isinstance(done.error, StepStopped)
                continue
            step = spec.step_of(node)
            if halted or (failed and downstream is None):
                break  # what follows is NOT_RUN (or SKIPPED behind a closed gate): settle() says which
            call = outermost(spec, node.name)
            if call is not None:
                if call.name in mapped_calls:
                    continue
                mapped_calls.add(call.name)
                if downstream is not None and not downstream.can_start(node.name):
                    for x in call.nodes:
                        downstream.fail(x)
                    continue
                if not _gate_open(spec, call.gate, outputs, typed_params):
                    continue
                options.emit(call.name, "started", "")
                ran = CallMap(spec, plan, call, run, cache, options).run(typed_params, outputs)
                seen.update(ran.seen)
                maps[call.name] = ran.report
                outputs.update(ran.outputs)
                if not ran.succeeded:
                    failed, halted = True, halted or ran.stopped
                    if downstream is not None:
                        for x in call.nodes:
                            downstream.fail(x)
                options.emit(call.name, Status.SUCCEEDED if ran.succeeded else Status.FAILED,
                             f"{ran.report.items} item(s)")
                continue
            why_not = tries.blocked(node.name)  # il.attempt(): after its failure, or a fallback not needed
            if why_not is not None:
                if why_not == "skipped":
                    seen[node.name] = Seen(Status.SKIPPED)
                options.emit(node.name, why_not, "the attempt failed" if why_not == "not-run" else "the attempt succeeded")
                continue
            rule = rule_of(node)
            if downstream is not None and not downstream.can_start(node.name) and rule not in AFTER_FAILURE:
                downstream.fail(node.name)  # behind a failure: NOT_RUN
                continue
            if not _gate_open(spec, node.gate, outputs, typed_params):
                options.emit(node.name, Status.SKIPPED, "gate closed")
                continue
            blocked = join_decision(node, lambda up: _status_of(up, seen, downstream))  # run_if (core/model/joins.py)
            if blocked is not None:
                status, why = blocked
                if status is Status.SKIPPED:
                    seen[node.name] = Seen(Status.SKIPPED)
                elif downstream is not None:
                    downstream.fail(node.name)
                options.emit(node.name, status, why)
                continue
            inputs = node_inputs(spec, node.name, typed_params, outputs, missing_as_none=rule in READS_MISSING)
            backup = fallback_of(spec, node.name)
            if backup is not None:  # the attempt's il.RunStatus, settled from the run state
                inputs = fallback_inputs(spec, node.name, inputs,
                                         run_status(settle(attempt_spec(spec, backup), run.state, None)))
            if node.map is not None:  # il.map: one shim run per item (fanout.py)
                options.emit(node.name, "started", "")
                mapped = run_map(spec, node, inputs, run, cache, options)
                seen[node.name] = mapped.seen
                if mapped.report is not None:
                    maps[node.name] = mapped.report
                if mapped.outputs is not None:
                    outputs[node.name] = mapped.outputs
                elif not (mapped.seen.status is Status.FAILED and tries.record_failure(node.name)):
                    failed, halted = True, halted or mapped.seen.status is Status.STOPPED
                    if downstream is not None:
                        downstream.fail(node.name)
                options.emit(node.name, mapped.seen.status, f"{mapped.report.items if mapped.report else 0} item(s)")
                continue
            use_cache = options.cache and step.cache is not None and step.cache.enabled
            key = cache_key(step, inputs) if use_cache else None
            values_dir = options.run_dir / "values" / node.name
            # A resumed run (a reused id): a step that succeeded earlier in this run with the
            # same code and inputs is not run again; anything else of its is removed first.
            full_key = key is not None and step.cache is not None and not step.cache.ignore_inputs
            inputs_key = key if key is not None and full_key else _inputs_key(step, inputs)
            earlier = _earlier_outputs(run, step, node.name, values_dir, inputs_key)
            if earlier is not None:
                outputs[node.name] = earlier
                seen[node.name] = Seen(Status.SUCCEEDED)
                options.emit(node.name, Status.SUCCEEDED, "done in an earlier attempt of this run")
                continue
            shutil.rmtree(values_dir, ignore_errors=True)
            hit = cache.get(step, key) if key else None
            if hit is not None and key and _same_attempt(cache.provenance(step, key), options.run_id, attempt):
                # Written by this very run (the same step called twice with the same inputs): run it
                # again, as Flyte and KFP do when two identical nodes of one run start together.
                # An earlier attempt of the run (before a resume) is a cache hit like any other.
                hit = None
            if hit is not None and key:
                outputs[node.name] = hit
                record_cache_hit(run, step, node.name, cache.provenance(step, key))
                seen[node.name] = Seen(Status.CACHED)
                options.emit(node.name, Status.CACHED, key[:12] if key else "")
                continue
            options.emit(node.name, "started", "")
            try:
                fn = options.functions.get(step.name)
                # A distributed step runs as local ranks (distributed.py); the rest in-process.
                result = (run_distributed(run, spec, step, node.name, inputs) if step.distributed is not None
                          else execute_step(run, step, node.name, inputs, fn))
            except StepSkipped as exc:  # il.Skip: skipped, and what reads it follows its join rule
                seen[node.name] = Seen(Status.SKIPPED)
                options.emit(node.name, Status.SKIPPED, exc.why)
                continue
            except StepFailed as exc:
                stopped = isinstance(exc, StepStopped)
                seen[node.name] = Seen(Status.FAILED, error=exc)
                if not stopped and tries.record_failure(node.name):  # handled: its fallback runs next
                    options.emit(node.name, Status.FAILED, f"{exc.kind}: {exc.reason} (handled by its fallback)")
                    continue
                failed = True
                halted = halted or stopped  # told to stop: nothing starts, whatever the policy
                if downstream is not None:
                    downstream.fail(node.name)
                options.emit(node.name, Status.STOPPED if stopped else Status.FAILED,
                             exc.reason if stopped else f"{exc.kind}: {exc.reason}")
                continue
            # Values cross the boundary as files, exactly as they would between containers.
            try:
                _write_values(step, result.outputs, values_dir, inputs_key)
                outputs[node.name] = {p.name: read_value(p.type, values_dir / p.name) for p in step.outputs}
            except Exception as exc:  # noqa: BLE001 - a full disk, an unserializable value: the step failed
                failed = True
                if downstream is not None:
                    downstream.fail(node.name)
                error = output_failed(run, step, node.name, exc)
                seen[node.name] = Seen(Status.FAILED, error=error)
                options.emit(node.name, Status.FAILED, f"{error.kind}: {error.reason}")
                continue
            if key:
                provenance = {"run_id": options.run_id, "run_attempt": attempt, "snapshots": result.snapshots,
                              "facts": result.facts}
                cache.put(step, key, outputs[node.name], provenance)
            seen[node.name] = Seen(Status.SUCCEEDED)
            duration = result.ended - result.started
            options.emit(node.name, Status.SUCCEEDED, f"{duration:.2f}s, {len(result.attempts)} attempt(s)")

        gates = gate_decisions(spec, typed_params, outputs)
        outcome = settle(spec, run.state, seen, gates=gates)
        outcome = run_finally(spec, run, typed_params, options, outcome, outputs, early)  # il.finally_, if any
        final = {} if outcome.error else {k: pipeline_output(b, typed_params, outputs) for k, b in spec.outputs}
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=self.name, state_dir=run.state_dir, params=params,
            status=outcome.status, statuses=outcome.statuses, started=started, outputs=final, gates=gates,
        )
        if outcome.error is not None:
            outcome.error.receipt_path = str(receipt)
        return RunResult(spec.name, options.run_id, self.name, outcome.status, final, outcome.steps, receipt,
                         outcome.error, maps=maps)


INPUTS_KEY = ".inputs-key"  # not a port name: ports are identifiers


def _inputs_key(step: StepSpec, inputs: dict[str, Any]) -> str:
    """The step's code and every input, hashed: what its recorded outputs are valid for."""
    parts = {
        "fingerprint": step.fingerprint,
        "inputs": {p.name: value_hash(inputs.get(p.name, p.default), p.type) for p in step.inputs},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _write_values(step: StepSpec, values: dict[str, Any], dest: Path, inputs_key: str) -> None:
    """Write a node's outputs next to ``dest`` and rename them into place, so that a reader
    sees all of them or none, never old files mixed with new ones."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        for port in step.outputs:
            write_value(values[port.name], port.type, tmp / port.name)
        (tmp / INPUTS_KEY).write_text(inputs_key)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _earlier_outputs(
    run: RunContext, step: StepSpec, node: str, values_dir: Path, inputs_key: str,
) -> dict[str, Any] | None:
    """The outputs a step wrote when it succeeded earlier in this run with these inputs, if any."""
    frag = run.state.read_fragment(node)
    marker = values_dir / INPUTS_KEY
    if frag is None or frag.status is not Status.SUCCEEDED or not marker.is_file():
        return None
    try:
        if marker.read_text() != inputs_key:
            return None
        return {p.name: read_value(p.type, values_dir / p.name) for p in step.outputs}
    except (OSError, ValueError, SerializationError):
        return None  # unreadable: run the step again


def _status_of(node: str, seen: dict[str, Seen], downstream: Downstream | None) -> Status:
    """How an upstream ended: as seen, else not-run behind a failure, else skipped (a closed gate)."""
    if node in seen:
        return seen[node].status
    return Status.NOT_RUN if downstream is not None and node in downstream.down else Status.SKIPPED


def _gate_open(spec: PipelineSpec, gate: str | None, outputs: dict[str, dict[str, Any]], params: dict[str, Any]) -> bool:
    try:
        return gate_open(spec, gate, outputs, params)
    except KeyError:  # a join that runs after a failure, in a block whose condition was never produced
        return False


def resolve_param(value: Any, t: Any) -> Any:
    from interlock.core.model.codecs import revive

    return revive(value, t)


def _same_attempt(provenance: dict[str, Any], run_id: str, attempt: int) -> bool:
    """Did this attempt of this run write the cache entry?"""
    return provenance.get("run_id") == run_id and provenance.get("run_attempt", 0) == attempt
