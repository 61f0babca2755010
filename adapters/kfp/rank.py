"""One rank of a distributed KFP step: ``python -m interlock.adapters.kfp.rank <handoff dir>``.

torchrun (in a TrainJob/PyTorchJob pod) or the local launcher (kfp-local) starts it with
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set. It runs the step through the same shim
as any KFP task, inside the process group, with no in-process retries: a rank that retried
alone would wait forever for the others, so the launcher judges the job and retries it whole.
Rank 0 keeps the node's receipt fragment and writes the outputs; other ranks keep their
fragments under ``ranks/<rank>/`` (their failures still reach the launcher).
"""

from __future__ import annotations

import sys
from pathlib import Path

from interlock.core.base.errors import StepFailed
from interlock.core.base.status import FailureKind
from interlock.core.model.refs import load_spec
from interlock.plugins.pytorch.launch import execute_rank

from .entry import node_inputs, run_context
from .handoff import rank_args, read_call, write_result
from .names import io_names
from .types import to_parameter, write_artifact


def run_rank(directory: Path) -> int:
    call = read_call(directory)
    spec = load_spec(call["pipeline_ref"])
    node = call["node"]
    step = spec.step_of(node)
    if step.fingerprint != call["fingerprint"]:
        raise StepFailed(
            node, FailureKind.FATAL,
            f"the code of step {step.name!r} in the rank image differs from the compiled pipeline",
            hint="build the job's image from the same commit as the pipeline, then recompile", pipeline=spec.name,
        )
    args = rank_args(directory, call)
    inputs = node_inputs(spec, step, node, args)
    run = run_context(spec)
    # Every rank checkpoints into the node's store (rank 0 saves, all restore) and records
    # under ranks/<rank>: the node's fragment is the launcher's verdict.
    run.checkpoint_root = run.checkpoint_root or str(run.state.checkpoints_dir)
    me, result = execute_rank(run, step, node, inputs)
    if result is None:
        return 1
    if me == 0:
        _, names_out = io_names(step)
        params = []
        for port in step.outputs:
            value = result.outputs[port.name]
            if port.type.is_artifact:
                write_artifact(value, port.type, args[names_out[port.name]])
            else:
                params.append(to_parameter(value, port.type, f"step {step.name!r}, output {port.name!r}"))
        write_result(directory, params, args, list(call["outputs"]))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m interlock.adapters.kfp.rank HANDOFF_DIR", file=sys.stderr)
        return 2
    return run_rank(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
