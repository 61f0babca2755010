"""Distributed PyTorch steps on Flyte 2: the SDK's PyTorch plugin (``flyteplugins-pytorch``).

A distributed step gets a ``TaskEnvironment`` of its own whose ``plugin_config`` is the
plugin's ``Elastic``: the task becomes the plugin's ``TorchFunctionTask``, which a Flyte 2
cluster runs as a PyTorchJob (``nnodes`` pods; one plain pod for ``nnodes=1``), torch
elastic starting ``nproc_per_node`` workers in each. The plugin has no fixed-world job
type (flytekit's ``PyTorch``): a fixed world is ``Elastic(nnodes=N)``, with min = max = N.

Each worker calls the task's function, pickled: so the task is a plain ``def`` (a
coroutine cannot cross), which the driver awaits through the SDK's ``.aio``, and its body
is ``run_ranks``: the shim in this rank's process group; rank 0 writes the outputs and the
node's fragment, the other ranks keep theirs under ``ranks/<n>/``.

The plugin's local mode calls the function once, in the parent's process, with no ranks:
``flyte2-local`` refuses a distributed step at build time instead of running a world of one.
"""

from __future__ import annotations

from pathlib import Path

from interlock.core.base.errors import StepFailed
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import StepSpec
from interlock.core.run.runtime import execute_step
from interlock.plugins.pytorch import process_group, rank

from . import values
from .task import flyte_error, outputs_json, run_context

PLUGIN_IMPORT = "from flyteplugins.pytorch import Elastic"


def plugin_config(step: StepSpec) -> str | None:
    """The step's ``Elastic(...)``, as source text; None for a step that is not distributed."""
    t = step.distributed
    if t is None:
        return None
    nnodes = repr(f"{t.min_nodes}:{t.nnodes}") if t.elastic else str(t.nnodes)
    args = [f"nnodes={nnodes}", f"nproc_per_node={t.nproc_per_node}", f"max_restarts={t.max_restarts}"]
    if t.timeout_s is not None:  # every collective's bound; the shim passes it to init_process_group too
        args.append(f"nccl_collective_timeout_sec={max(1, round(t.timeout_s))}")
    return f"Elastic({', '.join(args)})"


def run_ranks(spec: PipelineSpec, store: str, node: str, refs: dict[str, str]) -> str:
    """A distributed node's task body, in each worker the plugin starts: the shim inside the
    process group torch elastic prepared; rank 0's outputs' references as JSON ("" elsewhere:
    the plugin returns rank 0's result)."""
    step = spec.step_of(node)
    run = run_context(spec, store)
    me = rank()
    if me:  # one fragment per node: the other ranks keep theirs apart (the receipt sums their devices)
        run.state_dir = run.state.for_rank(me).state_dir
    root = Path(store)
    types = {p.name: p.type for p in step.inputs}

    def inputs() -> dict[str, object]:  # read after the shim's stop-marker check
        return {k: values.get(root, ref, types[k]) for k, ref in refs.items() if ref and k in types}

    try:
        with process_group(step.distributed):
            result = execute_step(run, step, node, inputs)
        return outputs_json(run, step, node, root, result.outputs) if me == 0 else ""
    except StepFailed as err:
        # In a worker the plugin turns any exception into a failed job, which Flyte retries:
        # the shim's FATAL marker makes that retry end at once.
        raise flyte_error(err) from err
