"""What a distributed step's tasks and ranks exchange on the run's volume.

``<state_dir>/argo-values/<node>/in/<param>``: the step's artifact inputs, unpacked there by
the ``<node>-inputs`` task (``stage``); ``.../out/``: rank 0's outputs, in the layout of a
container template's ``/tmp/interlock/out``, which the ``<node>-outputs`` task copies out for
Argo to read (``publish``), recording the node's fragment as the KFP launcher does. When the
job failed for good (after Argo's retries), the job task's exit hook records the verdict drawn
from the ranks' records (``settle``), so the receipt says failed, not "not run".
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from interlock.core.base.status import FailureKind
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.plugins.pytorch.launch import JobEnd, judge, rank_state, record_launch

from .distributed import VALUES
from .exit_codes import exit_code

DONE = ".done"


def values_dir(state_dir: Path, node: str) -> Path:
    return Path(state_dir) / VALUES / node


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_dir():
        shutil.rmtree(dst)
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)


def stage(state_dir: Path, node: str, given: list[tuple[str, str, str]]) -> int:
    """Each artifact input (``--in artifact PORT PATH``) onto the volume, under its file name."""
    folder = values_dir(state_dir, node) / "in"
    for kind, _, path in given:
        if kind == "artifact":
            _copy(Path(path), folder / Path(path).name)
    return 0


def publish(spec: PipelineSpec, node: str, out: Path, keep: tuple[str, ...] = ()) -> int:
    """Rank 0's outputs where the template's ``outputs`` read them; the node's fragment."""
    from .entry import run_context
    from .gates import keep as keep_value

    run_ctx = run_context(spec.name)
    step = spec.step_of(node)
    src = values_dir(run_ctx.state_dir, node) / "out"
    if not (src / DONE).exists():
        print(f"interlock: {node}: the TrainJob succeeded but rank 0 left no outputs in {src}; the rank command "
              "must be `torchrun -m interlock.adapters.argo.rank`", file=sys.stderr, flush=True)
        return exit_code(FailureKind.FATAL, False)
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(p.name for p in src.iterdir() if p.name != DONE):
        _copy(src / name, out / name)
    for port in keep:
        keep_value(run_ctx.state_dir, node, port, (out / port).read_text())
    zero = rank_state(run_ctx, 0).read_fragment(node)
    world = step.distributed.world_size if step.distributed else 1
    record_launch(run_ctx, step, node, zero.started if zero else time.time(), None, world)
    return 0


def settle(spec: PipelineSpec, node: str) -> int:
    """The exit hook of the job task: after a failed job, the node's fragment from what the
    ranks recorded (the most severe failure, as the KFP launcher judges) and, for FATAL, the
    node's marker. Nothing after a success (``publish`` records it) or when no rank ever ran
    (a skipped task, or a job that never started: Argo's status says so)."""
    from .entry import run_context

    run_ctx = run_context(spec.name)
    if (values_dir(run_ctx.state_dir, node) / "out" / DONE).exists():
        return 0
    step = spec.step_of(node)
    world = step.distributed.world_size if step.distributed else 1
    records = [f for r in range(world) if (f := rank_state(run_ctx, r).read_fragment(node)) is not None]
    if not records:
        return 0
    failure = judge(run_ctx, node, world, JobEnd(False, "Failed", "the TrainJob failed"), 0.0)
    record_launch(run_ctx, step, node, min(f.started for f in records), failure, world,
                  decision="not retried" if failure.kind is FailureKind.FATAL else "Argo's retries spent")
    if failure.kind is FailureKind.FATAL and run_ctx.state.read_marker(node) is None:
        run_ctx.state.write_marker(node, failure)
    print(f"interlock: {node}: {failure.kind}: {failure.reason}", file=sys.stderr, flush=True)
    return 0
