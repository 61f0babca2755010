"""A distributed step (``il.Torchrun``) on the ``local`` backend: its ranks as local processes.

The same process group torchrun would start on one node (gloo on CPU, ``nnodes x
nproc_per_node`` ranks, env:// rendezvous on 127.0.0.1), supervised and judged by the helpers
the KFP launcher uses on kfp-local (``interlock.plugins.pytorch.launch``). Each rank runs the
step through the runtime shim (``python -m interlock.adapters.local.rank``), with no
in-process retries: a rank that retried alone would wait forever for its peers, so the whole
group is relaunched instead, by the step's ``Retry`` policy (TRANSIENT at once, CONTENTION
after its backoff, PREEMPTED when a rank was reclaimed); FATAL is never retried. Rank 0's
outputs are the step's.

Values cross into and out of the ranks as files, as between containers::

    <state_dir>/dist/<node>/call.json    pipeline ref, node, code fingerprint
    <state_dir>/dist/<node>/in/<port>    each input (core.values.write_value)
    <state_dir>/dist/<node>/out/<port>   rank 0's outputs
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.base.errors import StepFailed
from interlock.core.base.status import FailureKind, Status
from interlock.core.failure.decisions import RetryTracker
from interlock.core.failure.record import Failure
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import StepSpec
from interlock.core.model.values import read_value, write_value
from interlock.core.run.devices import visible_gpus
from interlock.core.run.env import RunEnv
from interlock.core.run.files import write_json_atomic
from interlock.core.run.runtime import StepResult
from interlock.core.run.state import RunContext
from interlock.plugins.pytorch.launch import (
    LocalRanks,
    _clear_rank_markers,
    judge,
    rank_state,
    record_launch,
    refuse_if_marked,
    stop_launch,
    stopped_by,
    supervise,
)
from interlock.plugins.pytorch.process_group import host_cannot_run

log = logging.getLogger("interlock.local.distributed")
RANK_MODULE = "interlock.adapters.local.rank"


@dataclass(frozen=True)
class LocalJob:
    """The local process group of one distributed node (what LocalRanks starts)."""

    node: str
    world_size: int
    env: dict[str, str] = field(default_factory=dict)


def handoff_dir(run: RunContext, node: str) -> Path:
    return Path(run.state_dir) / "dist" / node


def _child_pythonpath() -> str:
    # The ranks must import the team's modules exactly as this process does.
    paths = [str(Path(p or ".").resolve()) for p in sys.path if Path(p or ".").exists()]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return os.pathsep.join([*extra, *paths])


def _stage(directory: Path, spec: PipelineSpec, step: StepSpec, node: str, inputs: dict[str, Any]) -> None:
    if directory.exists():
        shutil.rmtree(directory)  # a relaunch never sees a previous launch's outputs
    (directory / "out").mkdir(parents=True)
    for port in step.inputs:
        if port.name in inputs:
            write_value(inputs[port.name], port.type, directory / "in" / port.name)
    write_json_atomic(directory / "call.json", {
        "pipeline_ref": spec.ref, "node": node, "fingerprint": step.fingerprint,
        "inputs": [p.name for p in step.inputs if p.name in inputs],
    })


def run_distributed(
    run: RunContext, spec: PipelineSpec, step: StepSpec, node: str, inputs: dict[str, Any],
    *, poll_s: float = 0.2, grace_s: float = 10.0,
) -> StepResult:
    """Run ``node``'s ranks until they succeed or the step's retry policy gives up."""
    t = step.distributed
    assert t is not None
    problem = host_cannot_run(t, visible_gpus())
    if problem is not None:
        raise StepFailed(
            node, FailureKind.FATAL, f"distributed step {step.name!r}: {problem}",
            hint="write il.Torchrun(backend='auto', ...) (nccl where CUDA is visible, gloo elsewhere) or "
            "backend='gloo' to run it on this host",
            pipeline=spec.name,
        )
    if not spec.ref:
        raise StepFailed(
            node, FailureKind.FATAL, f"distributed step {step.name!r} needs an importable pipeline to start its ranks",
            hint="define the pipeline at module level in an importable module (the ranks import it by reference)",
            pipeline=spec.name,
        )
    refuse_if_marked(run, node)
    world = t.nnodes * t.nproc_per_node
    directory = handoff_dir(run, node)
    checkpoint_root = run.checkpoint_root or str(run.state.checkpoints_dir)
    run_env = {
        **RunEnv(
            pipeline=run.pipeline, run_id=run.run_id, backend=run.backend, state_dir=run.state_dir,
            retry_in_process=frozenset(), checkpoint_root=checkpoint_root, state_store=run.state_store,
            on_cluster=run.on_cluster or None,
        ).to_env(),
        "PYTHONPATH": _child_pythonpath(),
    }
    job = LocalJob(node, world, {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    tracker = RetryTracker(step.retry)
    started = time.time()
    while True:
        _stage(directory, spec, step, node, inputs)
        since = time.time() - 1.0
        ranks = LocalRanks(job, directory, run_env, grace_s=grace_s, module=RANK_MODULE)
        log.info("step %s: launching %d local ranks", node, world)
        end = supervise(ranks, poll_s=poll_s, report=lambda s: log.info("step %s: %s", node, s), on_cluster=run.on_cluster)
        if end.succeeded:
            out = directory / "out"
            if not (out / ".done").exists():
                failure = Failure(FailureKind.FATAL, "the ranks succeeded but rank 0 wrote no outputs",
                                  hint="rank 0 must run the step through interlock.adapters.local.rank")
                record_launch(run, step, node, since, failure, world)
                raise StepFailed(node, failure.kind, failure.reason, hint=failure.hint, pipeline=spec.name,
                                 failure=failure)
            outputs = {p.name: read_value(p.type, out / p.name) for p in step.outputs}
            record_launch(run, step, node, since, None, world)
            return _result(run, step, node, outputs, started)
        failure = judge(run, node, world, end, since)
        signal_name = stopped_by(run, node, world, end, failure)
        if signal_name is not None:  # the user stopped the run: not a failure, never relaunched
            raise stop_launch(run, step, node, since, world, signal_name)
        if failure.kind is not FailureKind.FATAL:
            _clear_rank_markers(run, node, world)
        decision = tracker.decide(failure)
        record_launch(run, step, node, since, failure, world,
                      decision=decision.reason if decision.retry else f"{failure.kind}: not retried")
        if decision.retry:
            log.warning("step %s: %s (%s): relaunching the ranks%s", node, failure.reason, failure.kind,
                        f" in {decision.delay_s:.0f}s" if decision.delay_s else "")
            if decision.delay_s:
                run.sleeper(decision.delay_s)
            continue
        if failure.kind is FailureKind.FATAL and run.state.read_marker(node) is None:
            run.state.write_marker(node, failure)
        frag = run.state.read_fragment(node)
        raise StepFailed(
            node, failure.kind, failure.reason, hint=failure.hint, pipeline=spec.name, failure=failure,
            attempts=len(frag.attempts) if frag else 1, attempt_log=frag.attempts if frag else (),
        )


def _result(run: RunContext, step: StepSpec, node: str, outputs: dict[str, Any], started: float) -> StepResult:
    frag = run.state.read_fragment(node)
    zero = rank_state(run, 0).read_fragment(node)
    return StepResult(
        node=node, step=step.name, outputs=outputs, attempts=list(frag.attempts) if frag else [],
        started=started, ended=frag.ended if frag else time.time(),
        snapshots=list(zero.snapshots) if zero else [], facts=dict(zero.facts) if zero else {},
    )


__all__ = ["LocalJob", "Status", "run_distributed"]
