"""One rank of a distributed step on the ``local`` backend: ``python -m interlock.adapters.local.rank DIR``.

Started by ``distributed.run_distributed`` (LocalRanks) with RANK, WORLD_SIZE, MASTER_ADDR
and MASTER_PORT set. It runs the step through the shim inside the process group, with no
in-process retries, and records under ``<state_dir>/ranks/<rank>`` (the node's own fragment
is the launcher's verdict); rank 0 writes the outputs into ``DIR/out``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from interlock.core.base.errors import StepFailed
from interlock.core.base.status import FailureKind
from interlock.core.model.refs import load_spec
from interlock.core.model.values import read_value, write_value
from interlock.core.run.state import RunContext
from interlock.plugins.pytorch.launch import execute_rank


def run_rank(directory: Path) -> int:
    call = json.loads((directory / "call.json").read_text())
    spec = load_spec(call["pipeline_ref"])
    node = call["node"]
    step = spec.step_of(node)
    if step.fingerprint != call["fingerprint"]:
        raise StepFailed(
            node, FailureKind.FATAL, f"the code of step {step.name!r} changed while its ranks were starting",
            hint="run the pipeline again", pipeline=spec.name,
        )
    types = {p.name: p.type for p in step.inputs}
    inputs = {name: read_value(types[name], directory / "in" / name) for name in call["inputs"]}
    me, result = execute_rank(RunContext.from_env(pipeline=spec.name), step, node, inputs)
    if result is None:
        return 1
    if me == 0:
        out = directory / "out"
        for port in step.outputs:
            write_value(result.outputs[port.name], port.type, out / port.name)
        (out / ".done").write_text("")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m interlock.adapters.local.rank HANDOFF_DIR", file=sys.stderr)
        return 2
    return run_rank(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
