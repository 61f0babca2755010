"""``il.map`` over a sub-pipeline compiled for Flyte 1 (issue 24): a dynamic task per mapped call,
serialized as protobufs; in a pod it compiles to one sub-workflow node per item, each body task
taking the item's index; what Flyte 1 does not render is refused while the pipeline is built.
(flyte-local runs the conformance cases: tests/conformance/test_map_subpipeline.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance import submap_pipelines as sp
from flyteidl.admin import task_pb2, workflow_pb2
from flyteidl.core import types_pb2

import interlock as il
from interlock.adapters.flyte.resolver import resolver
from interlock.adapters.flyte.submap import CALL_INDEX_ARG
from interlock.core.base.errors import PipelineDefinitionError


def _compile(pipeline: object, out: Path) -> dict[str, Path]:
    files = il.compile(pipeline, backend="flyte", out=out, project="p", domain="d", version="v1", image="img:1")
    return {f.name: f for f in files}


def _one(files: dict[str, Path], suffix: str) -> Path:
    [path] = [p for n, p in files.items() if n.endswith(suffix)]
    return path


def test_a_mapped_call_is_a_dynamic_task_node_between_its_list_and_its_reader(tmp_path: Path) -> None:
    files = _compile(sp.sweep, tmp_path)
    wf = workflow_pb2.WorkflowSpec()
    wf.ParseFromString(_one(files, "_submap-sweep_2.pb").read_bytes())
    nodes = {n.id: n for n in wf.template.nodes}
    assert list(nodes) == ["make-lrs", "trial", "best"]
    assert nodes["trial"].task_node.reference_id.name == "submap-sweep.trial"
    inputs = {b.var: b.binding for b in nodes["trial"].inputs}
    assert inputs["lr__items"].promise.node_id == "make-lrs"  # the list, from the step that makes it
    assert inputs["data"].promise.var == "data"  # a broadcast parameter
    assert nodes["best"].inputs[0].binding.promise.node_id == "trial"  # fan-in: the dynamic's list
    task = task_pb2.TaskSpec()
    task.ParseFromString(_one(files, "_submap-sweep.trial_1.pb").read_bytes())
    variables = task.template.interface.inputs.variables
    assert sorted(variables) == ["data", "lr__items"]
    assert variables["lr__items"].type.collection_type.simple == types_pb2.FLOAT
    assert variables["data"].type.simple == types_pb2.STRING
    assert task.template.interface.outputs.variables["o0"].type.HasField("collection_type")
    args = list(task.template.container.args)
    assert args[args.index("--") + 1:] == ["pipeline", "conformance.submap_pipelines:sweep", "node", "trial",
                                           "step", "trial"]
    # The body's tasks are compiled in the pod, by the dynamic: none is registered beside it.
    assert not any(n.endswith("trial.fit_1.pb") for n in files)


def _pod_job(ref: str, call: str, inputs: dict[str, Any], types: dict[str, Any]) -> Any:
    """What the mapped call's dynamic task compiles to in a pod (Flyte's DynamicJobSpec)."""
    from flytekit.configuration import Image, ImageConfig, SerializationSettings
    from flytekit.core.context_manager import ExecutionState, FlyteContextManager
    from flytekit.core.type_engine import TypeEngine

    task = resolver.load_task(["pipeline", ref, "node", call, "step", call])
    settings = SerializationSettings(image_config=ImageConfig(default_image=Image(name="d", fqn="img", tag="1")),
                                     project="p", domain="d", version="v1")
    ctx = FlyteContextManager.current_context().with_serialization_settings(settings)
    with FlyteContextManager.with_context(ctx) as ctx:
        pod = ctx.new_execution_state().with_params(mode=ExecutionState.Mode.TASK_EXECUTION)
        with FlyteContextManager.with_context(ctx.with_execution_state(pod)) as ctx:
            return task.dispatch_execute(ctx, TypeEngine.dict_to_literal_map(ctx, inputs, types))


def test_in_a_pod_the_dynamic_calls_the_body_sub_workflow_once_per_item() -> None:
    job = _pod_job("conformance.submap_pipelines:sweep", "trial", {"lr__items": [0.5, 1.0, 1.5], "data": "ab"},
                   {"lr__items": list[float], "data": str})
    assert [(n.id, n.workflow_node.sub_workflow_ref.name) for n in job.nodes] == [
        ("trial-0", "submap-sweep.trial"), ("trial-1", "submap-sweep.trial"), ("trial-2", "submap-sweep.trial")]
    [sub] = job.subworkflows
    assert sorted(sub.interface.inputs) == sorted(["data", "trial___lr", CALL_INDEX_ARG])
    # Each body task takes the item's index: its shim runs under trial.fit[i].
    assert {t.id.name: sorted(t.interface.inputs) for t in job.tasks} == {
        "submap-sweep.trial.fit": sorted(["lr", "data", CALL_INDEX_ARG]),
        "submap-sweep.trial.score": sorted(["model", "bonus", CALL_INDEX_ARG]),
    }
    [out] = job.outputs
    assert [b.promise.node_id for b in out.binding.collection.bindings] == ["trial-0", "trial-1", "trial-2"]


def test_a_body_with_a_branch_compiles_to_a_dynamic_over_the_list_alone(tmp_path: Path) -> None:
    files = _compile(sp.sweep_branch, tmp_path)
    task = task_pb2.TaskSpec()
    task.ParseFromString(_one(files, "_submap-branch.judge_1.pb").read_bytes())
    assert sorted(task.template.interface.inputs.variables) == ["lr__items"]  # data="ab" is a constant of the body


@pytest.mark.parametrize(("pipeline", "match"), [
    (sp.sweep_tolerant, r"il.map\(tolerate=1\) over sub-pipeline 'trial'"),
    (sp.nested, r"a mapped sub-pipeline call inside the mapped sub-pipeline call 'outer-pair'"),
])
def test_what_flyte_1_does_not_render_is_refused_at_build_with_a_hint(pipeline: object, match: str,
                                                                     tmp_path: Path) -> None:
    with pytest.raises(PipelineDefinitionError, match=match) as err:
        _compile(pipeline, tmp_path)
    assert "--backend local" in (err.value.hint or "")


@il.pipeline(name="submap-cached-strict")
def _cached_strict(lrs: list[float] = [1.0, 2.0]):  # noqa: B006 - recorded, never mutated
    return sp.kept(scores=il.map(sp.cached_trial, over=lrs, data="ab"))


@pytest.mark.parametrize("backend", ["local", "flyte-local"])
def test_a_rerun_serves_the_cached_body_step_of_every_item_as_local_does(backend: str, tmp_path: Path) -> None:
    # flytekit's cache serves the body task without running the shim (no item fragment): the step
    # still reports cached, as on local (the conformance case of this runs with tolerate=, refused here).
    runs = [il.run(_cached_strict, backend=backend, workdir=tmp_path / "w", raise_on_failure=False) for _ in range(2)]
    assert [r.outputs for r in runs] == [{"o0": [3.0, 5.0]}] * 2
    statuses = [{k: (str(v.status), v.attempts) for k, v in r.steps.items()} for r in runs]
    assert statuses == [
        {"cached-trial.cached_fit": ("succeeded", 2), "cached-trial.score": ("succeeded", 2), "kept": ("succeeded", 1)},
        {"cached-trial.cached_fit": ("cached", 0), "cached-trial.score": ("succeeded", 2), "kept": ("succeeded", 1)},
    ]
    assert [(r.maps["cached-trial"].items, r.maps["cached-trial"].failed) for r in runs] == [(2, [])] * 2


def test_a_step_map_inside_the_body_is_an_array_node_binding_the_item_index() -> None:
    job = _pod_job("conformance.submap_pipelines:grid", "grid-row", {"row__items": [1, 2], "width": 2},
                   {"row__items": list[int], "width": int})
    assert [n.id for n in job.nodes] == ["grid-row-0", "grid-row-1"]
    [sub] = job.subworkflows
    [array] = [n for n in sub.nodes if n.array_node is not None]
    assert array.id == "grid-row-square"
    assert CALL_INDEX_ARG in array.array_node.to_flyte_idl().bound_inputs  # the call's item, the same for each


@pytest.mark.parametrize("backend", ["local", "flyte-local"])
def test_a_step_map_inside_the_body_runs_per_item_of_the_call(backend: str, tmp_path: Path) -> None:
    r = il.run(sp.grid, backend=backend, workdir=tmp_path / "w", raise_on_failure=False)
    assert r.succeeded, r.error
    assert r.outputs == {"o0": 2923}
    assert {k: (str(v.status), v.attempts) for k, v in r.steps.items()} == {
        "grid-row.cells": ("succeeded", 3), "grid-row.square": ("succeeded", 6), "grid-row.row_sum": ("succeeded", 3),
        "grand_total": ("succeeded", 1)}
    assert r.maps["grid-row"].items == 3
