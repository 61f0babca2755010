"""One rank of a distributed step on Argo, in a TrainJob pod:

    torchrun --nnodes=2 --nproc-per-node=2 -m interlock.adapters.argo.rank REF NODE FINGERPRINT

with INTERLOCK_ARGO_INPUTS='[["state", "data"], ["json", "params"]]', INTERLOCK_ARGO_IN_0=in/data
and INTERLOCK_ARGO_IN_1 the text Argo substituted. torchrun sets RANK, WORLD_SIZE and
MASTER_*; the rank reads its inputs as the task entry does (kind ``state``: an artifact the
``<node>-inputs`` task left under ``argo-values/<node>/``),
runs the step through the shim in the process group (``execute_rank``: no in-process retries,
records under ``ranks/<rank>``) and rank 0 writes the outputs to the volume for the
``<node>-outputs`` task. Argo retries the whole job (the resource template's retryStrategy),
blind to why it failed: a rank that failed FATAL leaves the node's marker, and the ranks of a
retry exit at once on it, so a FATAL step costs one short pod start per retry left, not a run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from interlock.core.base.errors import StepFailed, StepStopped
from interlock.core.base.status import FailureKind
from interlock.core.model.refs import load_spec
from interlock.core.run.records import StopMarker
from interlock.plugins.pytorch.launch import execute_rank, rank_state

from .distributed import INPUT_ENV, INPUTS_ENV
from .entry import node_inputs, run_context
from .exit_codes import GAVE_UP, exit_code
from .handoff import DONE, values_dir
from .values import write_output


def run_rank(pipeline: str, node: str, fingerprint: str, given: list[tuple[str, str, str]]) -> int:
    spec = load_spec(pipeline)
    step = spec.step_of(node)
    if step.fingerprint != fingerprint:
        print(f"interlock: the code of step {step.name!r} in the rank image differs from the compiled workflow; "
              "build the job's image from the same commit, then recompile", file=sys.stderr, flush=True)
        return GAVE_UP
    run = run_context(spec.name)
    run.checkpoint_root = run.checkpoint_root or str(run.state.checkpoints_dir)  # rank 0 saves, all restore
    node_state, values = run.state, values_dir(run.state_dir, node)
    prior = node_state.stop_marker(node)
    if prior is not None:  # an earlier launch failed FATAL (or was stopped): Argo's retry ends at once
        print(f"interlock: {node}: not run again: {prior.failure.reason}", file=sys.stderr, flush=True)
        return GAVE_UP
    me = int(os.environ.get("RANK", "0"))
    for kind in StopMarker:  # this rank's markers echo the previous launch, never refuse this one
        rank_state(run, me).marker_path(node, kind).unlink(missing_ok=True)
    inputs = node_inputs(spec, node, [("artifact", port, str(values / v)) if k == "state" else (k, port, v)
                                      for k, port, v in given])
    try:
        me, result = execute_rank(run, step, node, inputs)
    except StepStopped as exc:
        print(f"interlock: {exc.headline()}", file=sys.stderr, flush=True)
        return exc.exit_code
    if result is None:
        frag = rank_state(run, me).read_fragment(node)
        failure = next((a.failure_record() for a in reversed(frag.attempts) if a.failure_record()), None) if frag else None
        # A classified FATAL is the cause; an unclassified error is often a peer's echo of it.
        if failure is not None and failure.kind is FailureKind.FATAL and failure.rule != "unclassified":
            node_state.write_marker(node, failure)
        return exit_code(failure.kind, True) if failure is not None else 1
    if me == 0:
        out = values / "out"
        for port in step.outputs:
            write_output(result.outputs[port.name], port.type, out, port.name)
        (out / DONE).write_text("")
    return 0


def given_inputs(env: dict[str, str]) -> list[tuple[str, str, str]]:
    """The (kind, port, value) triples the manifest put in the rank's env."""
    return [(kind, port, env[f"{INPUT_ENV}{i}"]) for i, (kind, port) in enumerate(json.loads(env.get(INPUTS_ENV, "[]")))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m interlock.adapters.argo.rank")
    p.add_argument("pipeline", help="module:attribute of the pipeline")
    p.add_argument("node")
    p.add_argument("fingerprint")
    a = p.parse_args(argv)
    try:
        return run_rank(a.pipeline, a.node, a.fingerprint, given_inputs(dict(os.environ)))
    except StepFailed as exc:
        print(f"interlock: {exc.headline()}", file=sys.stderr, flush=True)
        return exit_code(exc.kind, exc.backend_should_retry)


if __name__ == "__main__":
    sys.exit(main())
