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
from interlock.core.devices import group_device
from interlock.core.receipt import assemble_receipt
from interlock.core.runstate import Attempt, Fragment, RunState
from interlock.core.status import Status


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo"),
         resources=il.Resources(gpu=1, accelerator="nvidia-h200"))
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
