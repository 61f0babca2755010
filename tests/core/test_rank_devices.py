"""A distributed step's receipt bills the GPUs its ranks saw, not the GPUs it requested.

Each rank runs the shim and records its device in its own fragment (ranks/<rank>; on Flyte
rank 0's is the node's fragment). The receipt sums them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import interlock as il
from interlock.core.base.status import Status
from interlock.core.record.receipt import assemble_receipt
from interlock.core.run.devices import group_device
from interlock.core.run.records import Attempt, Fragment
from interlock.core.run.state import RunState


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo"),
         resources=il.Resources(gpu=2, accelerator="nvidia-h200"))  # per node: one GPU per rank
def fit(n: int) -> int:
    return n


@il.pipeline(name="rank-devices")
def rank_devices(n: int = 1):
    return fit(n=n)


SPEC = il.spec(rank_devices)
RUN = "rd-1"


def _frag(device: dict[str, Any] | None) -> Fragment:
    return Fragment(run_id=RUN, node="fit", step="fit", status=Status.SUCCEEDED, started=0.0, ended=10.0,
                    attempts=[Attempt(1, 0.0, 10.0, Status.SUCCEEDED)], device=device)


def _train(tmp_path: Path, node: dict[str, Any] | None, ranks: dict[int, dict[str, Any] | None]) -> dict[str, Any]:
    state = RunState(tmp_path / "state", RUN)
    state.write_fragment(_frag(node))
    for r, device in ranks.items():
        RunState(tmp_path / "state" / "ranks" / str(r), RUN).write_fragment(_frag(device))
    path = assemble_receipt(SPEC, run_id=RUN, backend="local", state_dir=tmp_path / "state", params={},
                            status=Status.SUCCEEDED, statuses={"fit": Status.SUCCEEDED}, started=0.0)
    step: dict[str, Any] = next(s for s in json.loads(Path(path).read_text())["steps"] if s["node"] == "fit")
    return step


CPU = {"type": "cpu", "count": 0, "source": "detected"}
GPU = {"type": "cuda", "count": 1, "source": "detected"}


def test_ranks_on_cpu_bill_no_gpu_though_two_were_requested(tmp_path: Path) -> None:
    # The launcher's node fragment (KFP, local) records no device; the ranks saw only CPUs.
    step = _train(tmp_path, None, {0: CPU, 1: CPU})
    assert step["gpus"]["requested"] == 2
    assert step["gpus"]["billed"] == 0 and step["gpu_seconds"] == 0


@pytest.mark.parametrize("node, ranks", [
    (None, {0: GPU, 1: GPU}),  # KFP and local: every rank under ranks/<rank>
    (GPU, {1: GPU}),  # Flyte: rank 0 keeps the node's fragment
])
def test_gpus_seen_by_the_ranks_are_summed(tmp_path: Path, node: Any, ranks: Any) -> None:
    step = _train(tmp_path, node, ranks)
    assert step["gpus"]["billed"] == 2 and step["gpus"]["device"]["ranks"] == 2
    assert step["gpu_seconds"] == pytest.approx(20.0)


def test_one_rank_without_a_gpu_is_not_billed_one(tmp_path: Path) -> None:
    assert _train(tmp_path, None, {0: GPU, 1: CPU})["gpus"]["billed"] == 1


def test_group_device_without_records_bills_the_request() -> None:
    assert group_device([None, None]) is None
    assert group_device([CPU, {"type": "cuda", "count": 2}]) == {"type": "cuda", "count": 2, "source": "ranks", "ranks": 2}


@pytest.mark.parametrize("nnodes, nproc, gpu, requested", [(1, 2, 2, 2), (2, 4, 4, 8), (3, 1, 1, 3)])
def test_resources_are_per_node_as_kfpytorch_and_trainer_read_them(nnodes: int, nproc: int, gpu: int,
                                                                    requested: int) -> None:
    # gpu=4 with nproc_per_node=4 is one GPU per rank, on each of nnodes pods.
    step = il.spec(_one_step(nnodes, nproc, il.Resources(gpu=gpu))).step_of("fit")
    assert step.nodes == nnodes and step.gpus == requested


def test_cpu_and_memory_are_billed_once_per_node(tmp_path: Path) -> None:
    from interlock.core.record.receipt import PriceTable

    one, three = (il.spec(_one_step(n, 2, il.Resources(cpu="4", memory="8Gi"))).step_of("fit") for n in (1, 3))
    table = PriceTable.load()
    cost = [table.estimate(s.resources.to_json(), 3600, gpus=0, interruptible=False, nodes=s.nodes) for s in (one, three)]
    assert cost[1] == pytest.approx(3 * cost[0]) and cost[0] > 0


def _one_step(nnodes: int, nproc: int, resources: il.Resources) -> il.Pipeline:
    @il.step(name="fit", distributed=il.Torchrun(nnodes=nnodes, nproc_per_node=nproc, backend="gloo"),
             resources=resources)
    def fit(n: int) -> int:
        return n

    @il.pipeline(name=f"per-node-{nnodes}")
    def per_node(n: int = 1):
        return fit(n=n)

    return per_node
