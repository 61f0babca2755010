"""Distributed steps on Flyte 2: what a cluster receives through the SDK's PyTorch plugin
(flyteplugins-pytorch), what each rank of a pod runs, and flyte2-local's refusal."""

from __future__ import annotations

import json
from pathlib import Path

import flyte
import flyte2_pipelines as fp
import pytest
from flyte._internal.runtime.task_serde import translate_task_to_wire
from flyte.models import SerializationContext
from flyte2_compiled import import_module, rank_entry
from flyteplugins.pytorch import Elastic
from flyteplugins.pytorch.task import TorchFunctionTask
from google.protobuf.json_format import MessageToDict

import interlock as il
from interlock.adapters.flyte2 import values
from interlock.core.base.errors import CapabilityError
from interlock.core.base.status import Status
from interlock.core.model.types import type_of
from interlock.core.run.env import state_dir_under
from interlock.core.run.state import RunState

INT = type_of(int)


def _compiled(tmp_path: Path, torchrun: il.Torchrun):  # type: ignore[no-untyped-def]
    @il.step(distributed=torchrun, resources=il.Resources(gpu=4, accelerator="nvidia-h200"))
    def train(x: int) -> int:
        return x

    @il.step
    def report(score: int) -> str:
        return str(score)

    @il.pipeline(name="f2-torch")
    def pipe(x: int = 1):
        return report(score=train(x=x))

    [path] = il.compile(pipe, backend="flyte2", out=str(tmp_path / "build"), image="reg.example/train:1")
    return Path(path), import_module(Path(path))


def _wire(task, root: Path) -> dict:  # type: ignore[no-untyped-def]
    """The task as `flyte deploy` sends it (the SDK's serializer is private: no public one)."""
    spec = translate_task_to_wire(task, SerializationContext(version="v1", project="p", domain="d", root_dir=root))
    return {"type": spec.task_template.type, "custom": MessageToDict(spec.task_template.custom)}


def test_an_elastic_step_is_a_pytorch_job_of_the_sdks_plugin(tmp_path: Path) -> None:
    path, mod = _compiled(tmp_path, il.Torchrun(nnodes=2, min_nodes=1, nproc_per_node=4, max_restarts=2, timeout="90s"))
    task = mod.step_train
    assert isinstance(task, TorchFunctionTask)
    assert task.plugin_config == Elastic(nnodes="1:2", nproc_per_node=4, max_restarts=2, nccl_collective_timeout_sec=90)
    wire = _wire(task, path.parent)
    assert wire["type"] == "pytorch"
    assert wire["custom"] == {
        "workerReplicas": {"replicas": 2.0},
        "elasticConfig": {"rdzvBackend": "c10d", "minReplicas": 1.0, "maxReplicas": 2.0, "nprocPerNode": 4.0,
                          "maxRestarts": 2.0},
    }
    # The plugin config is the environment's: the step has one of its own, the other step's has none.
    envs = {name: next(e for e in vars(mod).values() if isinstance(e, flyte.TaskEnvironment) and t in e.tasks.values())
            for name, t in (("train", task), ("report", mod.step_report))}
    assert envs["train"].plugin_config == task.plugin_config and envs["report"].plugin_config is None
    assert not isinstance(mod.step_report, TorchFunctionTask)
    # Each worker calls the function, pickled: a plain function, which the driver awaits through .aio.
    assert task._call_as_synchronous and "await d.step('train', step_train.aio)" in path.read_text()


def test_a_fixed_world_is_an_elastic_one_with_min_and_max_equal(tmp_path: Path) -> None:
    path, mod = _compiled(tmp_path, il.Torchrun(nnodes=3, nproc_per_node=1))
    assert mod.step_train.plugin_config == Elastic(nnodes=3, nproc_per_node=1, max_restarts=0)
    custom = _wire(mod.step_train, path.parent)["custom"]
    assert (custom["elasticConfig"]["minReplicas"], custom["elasticConfig"]["maxReplicas"]) == (3.0, 3.0)


def test_one_node_is_one_pod_of_the_plugin(tmp_path: Path) -> None:
    path, mod = _compiled(tmp_path, il.Torchrun(nnodes=1, nproc_per_node=2))
    assert _wire(mod.step_train, path.parent)["type"] == "python-task"  # the plugin's choice: no PyTorchJob
    assert mod.step_train.plugin_config.nproc_per_node == 2  # torch elastic starts 2 workers in the pod


def test_each_rank_runs_the_shim_in_the_process_group_and_rank_zero_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    store = tmp_path / "store"
    [path] = il.compile(fp.ddp, backend="flyte2", out=str(tmp_path / "build"), store=str(store))
    monkeypatch.setenv("INTERLOCK_RUN_ID", "r1")  # a pod's run id (else the Flyte run's name)
    # What the plugin's execute() does in a pod: torch elastic, one worker per process of the node.
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, rdzv_backend="c10d",
                          rdzv_endpoint="localhost:0", run_id="r1", max_restarts=0, monitor_interval=0.2)
    ref = values.put(store, 1, INT)
    out = elastic_launch(config, rank_entry)(str(path), "step_allreduce", {"x": ref})
    assert values.get(store, json.loads(out[0])["o0"], INT) == 3  # (1 + 0) + (1 + 1)
    assert out[1] == ""  # the plugin returns rank 0's result
    state = RunState(state_dir_under(store, "r1"), "r1")
    assert state.read_fragment("allreduce").status is Status.SUCCEEDED
    assert state.for_rank(1).read_fragment("allreduce").status is Status.SUCCEEDED  # rank 1's, apart


def test_flyte2_local_refuses_a_distributed_step_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(CapabilityError, match="cannot express 'distributed'") as info:
        il.run(fp.ddp, backend="flyte2-local", workdir=str(tmp_path))
    assert "flyte-local" in (info.value.hint or "") and "--backend flyte2" in (info.value.hint or "")


def test_the_sdks_local_mode_runs_a_distributed_task_in_one_process(tmp_path: Path) -> None:
    """`flyte run --local` of the compiled module: the plugin calls the function once (no ranks)."""
    from interlock.adapters.flyte2.local import isolated_flyte

    store = tmp_path / "store"
    [path] = il.compile(fp.ddp, backend="flyte2", out=str(tmp_path / "build"), store=str(store))
    mod = import_module(Path(path))
    with isolated_flyte(tmp_path / "flyte-cache"), pytest.raises(Exception, match="f2-ddp.*allreduce"):
        flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw"),
                              run_base_dir=str(tmp_path / "base")).run(mod.DRIVER, x=1)
    # One process and no process group for the step's all_reduce: why flyte2-local refuses the step instead.
    [fragment] = (store / "runs").glob("*/state/receipts/allreduce.json")
    assert "process group has not been initialized" in fragment.read_text()


def test_compiling_without_the_plugin_installed_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.adapters.flyte2 import render

    monkeypatch.setattr(render, "PLUGIN_IMPORT", "from flyteplugins_not_installed import Elastic")
    with pytest.raises(CapabilityError, match="imports 'flyteplugins_not_installed', which is not installed") as info:
        il.compile(fp.ddp, backend="flyte2", out=str(tmp_path))
    assert "interlock[flyte2-pytorch]" in (info.value.hint or "")


def test_the_reference_ddp_pipeline_compiles_with_its_train_step_on_the_plugin(tmp_path: Path) -> None:
    from reference_pipelines.digits_ddp import digits_ddp

    [path] = il.compile(digits_ddp, backend="flyte2", out=str(tmp_path), image="reg/digits:1", store="/mnt/il")
    mod = import_module(Path(path))
    t = il.spec(digits_ddp).step("train").distributed
    assert t is not None
    assert mod.step_train.plugin_config == Elastic(nnodes=t.nnodes, nproc_per_node=t.nproc_per_node,
                                                   max_restarts=t.max_restarts)
    assert not any(isinstance(v, TorchFunctionTask) for k, v in vars(mod).items() if k not in ("step_train",))
