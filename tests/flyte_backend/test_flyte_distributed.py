"""A distributed step on flyte-local: torch elastic starts 2 CPU processes (gloo) that all-reduce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flyte_pipelines.dist import dist_pipeline

from interlock.adapters.flyte.backend import FlyteLocalOptions
from interlock.core.backend.protocol import RunOptions, get_backend


def test_two_process_allreduce_on_cpu(tmp_path: Path) -> None:
    # fork: the workers inherit the imported world instead of re-importing torch and flytekit
    # (spawn, the cluster default, works the same and takes ~4x longer on 2 cores).
    options = RunOptions(run_id="dist1", workdir=tmp_path / "work", backend_options=FlyteLocalOptions(spawn=False))
    result = get_backend("flyte-local").run(dist_pipeline.spec, {"base": 1.0}, options)

    assert result.status == "succeeded", result.error
    # ranks contribute base + rank = 1.0 + 2.0 = 3.0; the step returns sum * 10 + world size.
    assert result.outputs["o0"] == 32.0
    receipt = json.loads(Path(result.receipt_path).read_text())
    [step] = receipt["steps"]
    assert step["status"] == "succeeded"
    assert step["distributed"]["nproc_per_node"] == 2
    # Only rank 0 writes the node's fragment; rank 1 keeps its own apart.
    state = Path(result.receipt_path).parent
    assert (state / "ranks" / "1" / "receipts" / "allreduce.json").exists()


@pytest.mark.slow
def test_spawned_workers_as_on_a_cluster(tmp_path: Path) -> None:
    """spawn (the compiled default, what CUDA needs): workers start fresh interpreters and
    receive the task body through the plugin's cloudpickle helper (~1 min on 2 cores)."""
    options = RunOptions(run_id="dist2", workdir=tmp_path / "work")
    result = get_backend("flyte-local").run(dist_pipeline.spec, {"base": 2.0}, options)
    assert result.status == "succeeded", result.error
    assert result.outputs["o0"] == (2.0 + 3.0) * 10 + 2


FORK_AFTER_OPENMP = '''
import torch
import interlock as il
from interlock.adapters.flyte.backend import FlyteLocalOptions

@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo"))
def big_op(n: int) -> float:
    import torch.distributed as dist
    x = torch.ones(n) * 2  # a parallel kernel (n is far above OpenMP's grain size)
    t = torch.tensor([float(x.sum())])
    dist.all_reduce(t)
    return float(t.item())

@il.pipeline(name="fork-omp")
def fork_omp(n: int = 4_000_000):
    return big_op(n=n)

if __name__ == "__main__":
    torch.set_num_threads(2)
    torch.ones(4_000_000).add_(1).sum()  # the parent's OpenMP thread pool now exists
    result = il.run(fork_omp, backend="flyte-local", workdir=WORKDIR, options=FlyteLocalOptions(spawn=False),
                    progress=False)
    print("RESULT", result.outputs["o0"])
'''


def test_forked_ranks_do_not_hang_on_the_parents_openmp_pool(tmp_path: Path) -> None:
    """A parent that already ran a parallel kernel, then forked ranks: each rank's first
    parallel kernel used to wait forever for OpenMP threads that fork did not copy."""
    import subprocess
    import sys

    script = tmp_path / "fork_omp.py"
    script.write_text(FORK_AFTER_OPENMP.replace("WORKDIR", repr(str(tmp_path / "w"))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT 16000000.0" in done.stdout
