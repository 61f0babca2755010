"""Fan-out (il.map) and fan-in: the same outputs, types included, and the same step statuses on
local, flyte-local and kfp-local; the native construct in the compiled Flyte and KFP artifacts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from backends import backend_params, runnable_backends

import interlock as il
from conformance import fanout_pipelines as fp
from interlock.core.backend.protocol import available_backends
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.pipeline import spec as spec_of

S, F, N = "succeeded", "failed", "not-run"


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> Any:
    return il.run(pipeline, backend=backend, workdir=tmp_path / "work", raise_on_failure=False, **params)


def _statuses(result: Any) -> dict[str, str]:
    return {k: str(v.status) for k, v in result.steps.items()}


def _exact(got: Any, want: Any) -> None:
    """Equal and of the same types, element by element (an int never comes back a float)."""
    assert got == want
    assert json.dumps(got, sort_keys=False) == json.dumps(want, sort_keys=False)
    if isinstance(want, list):
        assert [type(g) for g in got] == [type(w) for w in want]
    else:
        assert type(got) is type(want)


@pytest.mark.parametrize("backend", backend_params())
def test_map_over_a_parameter_with_a_broadcast_argument(backend: str, tmp_path: Path) -> None:
    r = _run(fp.over_param, backend, tmp_path, xs=[4, 5, 6, 7], factor=2)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], 44)
    _exact(r.outputs["o1"], [8, 10, 12, 14])
    assert _statuses(r) == {"scale": S, "total": S, "listing": S}
    assert r.maps["scale"].items == 4 and r.maps["scale"].failed == []


@pytest.mark.parametrize("backend", backend_params())
def test_a_map_leaves_the_process_as_it_found_it(backend: str, tmp_path: Path) -> None:
    """kfp.local patches builtins.print and the root logger per task; a ParallelFor's threads
    interleave those patches and used to leave print indented for the rest of the process."""
    import builtins
    import logging

    before = (builtins.print, logging.getLogger().level, logging.getLogger().handlers[:])
    for _ in range(3):  # the interleaving is a race: give it a few chances
        assert _run(fp.over_param, backend, tmp_path / str(_), xs=[1, 2, 3, 4, 5, 6], factor=2).succeeded
    assert (builtins.print, logging.getLogger().level, logging.getLogger().handlers[:]) == before


@pytest.mark.parametrize("backend", backend_params())
def test_map_over_a_step_output_keeps_item_order(backend: str, tmp_path: Path) -> None:
    r = _run(fp.over_output, backend, tmp_path, n=5)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [3, 6, 9, 12, 15])
    assert _statuses(r) == {"numbers": S, "scale": S, "listing": S}


@pytest.mark.parametrize("backend", backend_params())
def test_each_item_has_its_own_receipt_entry(backend: str, tmp_path: Path) -> None:
    r = _run(fp.over_output, backend, tmp_path, n=3)
    receipt = json.loads(Path(r.receipt_path).read_text())
    step = next(s for s in receipt["steps"] if s["node"] == "scale")
    entries = step["facts"]["map"]["entries"]
    assert [(e["index"], e["node"], e["status"]) for e in entries] == [
        (0, "scale[0]", S), (1, "scale[1]", S), (2, "scale[2]", S)]
    assert len(step["attempts"]) == 3  # one attempt per item


@pytest.mark.parametrize("backend", backend_params())
def test_a_failed_item_fails_the_map_by_default(backend: str, tmp_path: Path) -> None:
    r = _run(fp.fail_fast, backend, tmp_path, n=5)
    assert r.status == F
    assert _statuses(r) == {"numbers": S, "fragile": F, "total": N}
    assert r.maps["fragile"].failed == [3]  # item 4 is index 3
    assert r.steps["fragile"].failure["kind"] == il.FailureKind.FATAL


@pytest.mark.parametrize("backend", backend_params())
def test_a_tolerant_map_gives_none_at_failed_items(backend: str, tmp_path: Path) -> None:
    r = _run(fp.tolerant, backend, tmp_path, n=8)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [0, 1, 2, 4, 5, 6])  # items 4 and 8 failed (indices 3 and 7)
    assert _statuses(r) == {"numbers": S, "fragile": S, "present": S}
    assert r.maps["fragile"].failed == [3, 7] and r.maps["fragile"].allowed_failures == 2
    receipt = json.loads(Path(r.receipt_path).read_text())
    step = next(s for s in receipt["steps"] if s["node"] == "fragile")
    assert step["facts"]["map"]["failed"] == [3, 7]


@pytest.mark.parametrize("backend", backend_params())
def test_more_failures_than_tolerated_fail_the_map(backend: str, tmp_path: Path) -> None:
    r = _run(fp.tolerant_exceeded, backend, tmp_path, n=8)
    assert r.status == F
    assert _statuses(r) == {"numbers": S, "fragile": F, "present": N}
    # Every item runs before the map fails, on every backend (flyte-local stopped at the first).
    assert r.maps["fragile"].failed == [3, 7] and r.maps["fragile"].allowed_failures == 0


@pytest.mark.parametrize("backend", backend_params())
def test_tolerate_one_point_zero_lets_every_item_fail(backend: str, tmp_path: Path) -> None:
    # A float is a fraction, an int a count: 1.0 was a count of one item before (issue 31 item 7).
    r = _run(fp.tolerate_all, backend, tmp_path / "all", n=4)  # only item 4 fails
    assert r.succeeded, r.error
    assert r.maps["fragile"].failed == [3] and r.maps["fragile"].allowed_failures == 4
    r = _run(fp.tolerate_all, backend, tmp_path / "all8", n=8)
    assert r.succeeded and r.maps["fragile"].allowed_failures == 8


@pytest.mark.parametrize("backend", backend_params("map.tolerate_count"))
def test_tolerate_one_is_a_count_of_one_item(backend: str, tmp_path: Path) -> None:
    r = _run(fp.tolerate_one, backend, tmp_path / "one", n=8)  # two fail, one is allowed
    assert r.status == F and r.maps["fragile"].failed == [3, 7] and r.maps["fragile"].allowed_failures == 1
    r = _run(fp.tolerate_one, backend, tmp_path / "one4", n=4)  # one fails
    assert r.succeeded and r.maps["fragile"].failed == [3]


def test_flyte_refuses_a_count_before_any_item_runs(tmp_path: Path) -> None:
    if "flyte-local" not in runnable_backends():
        pytest.skip("flyte-local is not installed")
    with pytest.raises(PipelineDefinitionError, match=r"il.map\(tolerate=1\): a count of failed items has no Flyte"):
        il.run(fp.tolerate_one, backend="flyte-local", workdir=tmp_path, progress=False)
    assert not list(tmp_path.glob("runs/*/state/fragments/*"))


@pytest.mark.parametrize("backend", backend_params())
def test_an_item_whose_value_cannot_be_sent_is_a_tolerated_item_failure(backend: str, tmp_path: Path) -> None:
    # The step returned, then its value could not be serialized: that item failed, counted
    # against the tolerance like any other (kfp-local reported a succeeded run whose last step
    # never ran; local raised out of il.run).
    r = _run(fp.unsendable_tolerated, backend, tmp_path, n=8)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [0, 1, 2, 4, 5, 6])
    assert _statuses(r) == {"numbers": S, "unsendable": S, "kept": S}
    assert r.maps["unsendable"].failed == [3, 7]


@pytest.mark.parametrize("backend", backend_params())
def test_an_item_whose_value_cannot_be_sent_fails_a_strict_map(backend: str, tmp_path: Path) -> None:
    r = _run(fp.unsendable_strict, backend, tmp_path, n=5)
    assert r.status == F
    assert _statuses(r) == {"numbers": S, "unsendable": F, "kept": N}
    assert r.maps["unsendable"].failed == [3]
    assert r.steps["unsendable"].failure["kind"] == il.FailureKind.FATAL
    assert "JSON" in r.steps["unsendable"].failure["reason"]


def test_kfp_renders_a_tolerant_map_as_a_loop_and_a_tolerance_task(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    import yaml

    path = il.compile(fp.tolerant, backend="kfp", out=tmp_path / "t.yaml")[0]
    ir = next(iter(yaml.safe_load_all(Path(path).read_text())))
    root = ir["root"]["dag"]["tasks"]
    loop_name, loop = next((k, t) for k, t in root.items() if "parameterIterator" in t)
    check = root["fragile-tolerance"]
    # The tolerance task reads the loop's collected envelopes; the reader reads the tolerance task.
    assert check["inputs"]["parameters"]["items"]["taskOutputParameter"]["producerTask"] == loop_name
    assert root["present"]["inputs"]["parameters"]["parts"]["taskOutputParameter"]["producerTask"] == "fragile-tolerance"
    item = next(iter(ir["components"][loop["componentRef"]["name"]]["dag"]["tasks"].values()))
    assert item["cachingOptions"] == {}  # a failed envelope must never be cached
    assert ir["components"][item["componentRef"]["name"]]["outputDefinitions"]["parameters"]["Output"][
        "parameterType"] == "STRING"


def test_kfp_refuses_a_tolerant_map_of_artifacts(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    from interlock.adapters.kfp.fanout import check

    spec = spec_of(fp.tolerant_datasets)
    with pytest.raises(PipelineDefinitionError, match="artifact output") as info:
        check(spec, "shard")
    assert "return the artifact's location" in str(info.value)
    with pytest.raises(PipelineDefinitionError, match="artifact output"):
        il.compile(fp.tolerant_datasets, backend="kfp", out=tmp_path / "t.yaml")


@pytest.mark.parametrize("backend", backend_params())
def test_an_empty_list_maps_to_an_empty_list(backend: str, tmp_path: Path) -> None:
    r = _run(fp.over_empty, backend, tmp_path, n=0)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], 0)
    assert _statuses(r) == {"numbers": S, "scale": S, "total": S}


@pytest.mark.parametrize("backend", backend_params())
def test_fan_in_from_a_literal_list_of_outputs(backend: str, tmp_path: Path) -> None:
    r = _run(fp.literal, backend, tmp_path, x=3)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], 3 + 6 + 7)
    assert _statuses(r) == {"a": S, "b": S, "total": S}


@pytest.mark.parametrize("backend", backend_params())
def test_a_map_of_optional_outputs_keeps_its_nones(backend: str, tmp_path: Path) -> None:
    """Each item's Optional output travels as JSON text on KFP: the reader gets the decoded list
    (it was refused: a LIST of texts into a JSON-text input)."""
    r = _run(fp.optional_items, backend, tmp_path, xs=[1, 2, 3, 4])
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [None, 2, None, 4])


@pytest.mark.parametrize("backend", backend_params())
def test_fan_in_from_a_literal_list_keeps_order_types_and_nones(backend: str, tmp_path: Path) -> None:
    r = _run(fp.literal_mixed, backend, tmp_path, x=3, label="p")
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [3.0, None, 6.0, 7.5])
    _exact(r.outputs["o1"], ["p", "3", "p"])
    assert _statuses(r) == {"a": S, "none": S, "b": S, "echo_floats": S, "text": S, "echo_texts": S}


@pytest.mark.parametrize("backend", backend_params())
def test_fan_in_from_a_literal_list_inside_a_branch(backend: str, tmp_path: Path) -> None:
    r = _run(fp.literal_in_branch, backend, tmp_path, x=2)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], 2)
    assert _statuses(r) == {"a": S, "b": S, "positive": S, "total": S}


def test_kfp_gathers_a_literal_list_in_a_gather_task(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    import yaml

    path = il.compile(fp.literal, backend="kfp", out=tmp_path / "l.yaml")[0]
    ir = next(iter(yaml.safe_load_all(Path(path).read_text())))
    root = ir["root"]["dag"]["tasks"]
    gather = root["total-parts-gather"]
    ins = gather["inputs"]["parameters"]
    assert [ins[f"i{k}"].get("taskOutputParameter", {}).get("producerTask") for k in range(3)] == ["a", "b", None]
    assert ins["i2"]["runtimeValue"]["constant"] == 7
    assert root["total"]["inputs"]["parameters"]["parts"]["taskOutputParameter"]["producerTask"] == "total-parts-gather"


def test_kfp_refuses_a_literal_list_of_artifacts(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    with pytest.raises(PipelineDefinitionError, match="list of artifacts written in the body"):
        il.compile(fp.literal_datasets, backend="kfp", out=tmp_path / "l.yaml")


@pytest.mark.parametrize("backend", backend_params())
def test_a_map_of_datasets_feeds_a_fan_in_step(backend: str, tmp_path: Path) -> None:
    r = _run(fp.datasets, backend, tmp_path, sizes=[1, 2, 3])
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [3, 6, 6])  # shards, rows, rows in the metadata
    assert _statuses(r) == {"shard": S, "merge": S}


# -- build-time model -----------------------------------------------------------------------
def test_the_mapped_output_is_a_list_and_optional_when_tolerant() -> None:
    spec = spec_of(fp.tolerant)
    node = spec.node("fragile")
    assert node.map is not None and node.map.item == "x" and node.map.tolerate == 0.25
    out = dict(spec.output_types)["o0"]
    assert out.describe() == "list[int]"
    from interlock.core.model.graph import binding_type
    from interlock.core.model.spec import Binding

    assert binding_type(spec, Binding.of_output("fragile", "o0")).describe() == "list[Optional[int]]"


def test_a_spec_with_maps_and_lists_round_trips_through_json() -> None:
    from interlock.core.model.pipeline_spec import PipelineSpec

    for p in (fp.over_param, fp.tolerant, fp.literal, fp.datasets):
        spec = spec_of(p)
        assert PipelineSpec.loads(spec.dumps()) == spec


def test_a_spec_without_map_fields_still_loads() -> None:
    from interlock.core.model.pipeline_spec import Node

    node = Node.from_json({"name": "a", "step": "a", "inputs": {"x": {"const": 1}}})
    assert node.map is None and "map" not in node.to_json()


def test_map_refuses_a_list_of_the_wrong_type() -> None:
    @il.pipeline(name="fan-bad")
    def bad(xs: list[str] = ["a"]):  # noqa: B006
        return fp.il_map(fp.scale, over=xs, factor=2)

    with pytest.raises(PipelineDefinitionError, match="list\\[int\\]"):
        spec_of(bad)


def test_map_needs_to_know_which_input_is_the_item() -> None:
    @il.pipeline(name="fan-ambiguous")
    def ambiguous(xs: list[int] = [1]):  # noqa: B006
        return fp.il_map(fp.scale, over=xs)

    with pytest.raises(PipelineDefinitionError, match="item="):
        spec_of(ambiguous)


@pytest.mark.parametrize("tolerate", [-1, 1.5, 2.0, -0.5, True, "10%"])
def test_a_bad_tolerance_is_refused(tolerate: Any) -> None:
    @il.pipeline(name="fan-bad-tolerance")
    def bad(xs: list[int] = [1]):  # noqa: B006
        return fp.il_map(fp.fragile, over=xs, tolerate=tolerate)

    with pytest.raises(PipelineDefinitionError, match="tolerate"):
        spec_of(bad)


# -- compiled artifacts ---------------------------------------------------------------------
def _kfp_ir(tmp_path: Path, name: str, pipeline: Any) -> str:
    return il.compile(pipeline, backend="kfp", out=tmp_path / f"{name}.yaml")[0].read_text()


def test_kfp_ir_has_a_parallel_for_and_a_collected_input(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    import yaml

    doc = next(yaml.safe_load_all(_kfp_ir(tmp_path, "p", fp.over_param)))
    tasks = doc["root"]["dag"]["tasks"]
    loops = {name: t for name, t in tasks.items() if "parameterIterator" in t}
    assert len(loops) == 1
    (loop_name, loop), = loops.items()
    assert loop["iteratorPolicy"]["parallelismLimit"] == 2
    assert loop["taskInfo"]["name"] == "scale-map"
    # the loop iterates the enumerated list; readers take the loop's collected output
    assert loop["parameterIterator"]["items"]["inputParameter"].endswith("enumerate-items-Output")
    for reader in ("total", "listing"):
        src = tasks[reader]["inputs"]["parameters"]["parts"]["taskOutputParameter"]
        assert src["producerTask"] == loop_name and src["outputParameterKey"].endswith("scale-Output")
    assert "scale" in doc["components"][loop["componentRef"]["name"]]["dag"]["tasks"]


def test_flyte_workflow_has_an_array_node(tmp_path: Path) -> None:
    pytest.importorskip("flytekit")
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    models = serialize(spec_of(fp.over_param), project="p", domain="d", version="v1", image="img:1")
    wfs = [m for m in models if isinstance(m, WorkflowSpec)]
    nodes = [n for wf in wfs for n in wf.template.nodes]
    arrays = [n for n in nodes if n.array_node is not None]
    assert len(arrays) == 1
    idl = arrays[0].array_node.to_flyte_idl()
    assert idl.parallelism == 2
    assert arrays[0].array_node.node.task_node is not None  # the per-item task inside


def graph_size(backend: str, pipeline: Any, tmp_path: Path) -> int:
    """Bytes of the compiled graph without the parameter defaults (KFP root DAG and components;
    Flyte workflow template): what would grow if the items were unrolled."""
    if backend == "kfp":
        import yaml

        doc = next(yaml.safe_load_all(_kfp_ir(tmp_path, "g", pipeline)))
        return len(json.dumps([doc["root"]["dag"], doc["components"], doc["deploymentSpec"]], sort_keys=True))
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    models = serialize(spec_of(pipeline), project="p", domain="d", version="v1", image="img:1")
    return sum(len(m.to_flyte_idl().SerializeToString()) for m in models if isinstance(m, WorkflowSpec))


def sized_pipeline(n: int) -> Any:
    @il.pipeline(name="fan-size")
    def sized(xs: list[int] = list(range(n)), factor: int = 2):  # noqa: B006 - the runtime list's default
        return fp.total(parts=fp.il_map(fp.scale, over=xs, factor=factor))

    sized.__module__ = fp.__name__
    return sized


@pytest.mark.parametrize("backend", ["kfp", "flyte"])
def test_compiled_size_does_not_grow_with_the_items(backend: str, tmp_path: Path) -> None:
    pytest.importorskip("kfp" if backend == "kfp" else "flytekit")
    small, large = (graph_size(backend, sized_pipeline(n), tmp_path / str(n)) for n in (10, 1000))
    assert small == large > 0


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize(("x", "inside"), [(2, S), (0, "skipped")])
def test_a_map_inside_a_branch(backend: str, x: int, inside: str, tmp_path: Path) -> None:
    r = _run(fp.map_in_branch, backend, tmp_path, x=x)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], x)
    assert _statuses(r) == {"positive": S, "numbers": inside, "scale": inside, "listing": inside, "after": S}


@pytest.mark.parametrize("backend", backend_params())
def test_a_fan_in_list_inside_a_branch_reads_outputs_from_outside(backend: str, tmp_path: Path) -> None:
    r = _run(fp.literal_in_branch, backend, tmp_path, x=3)
    assert r.succeeded, r.error
    assert _statuses(r) == {"a": S, "b": S, "positive": S, "total": S}


def test_a_kfp_local_loop_leaves_the_root_logger_as_it_was(tmp_path: Path) -> None:
    import logging

    if "kfp-local" not in available_backends():
        pytest.skip("kfp-local not installed")
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    r = _run(fp.over_param, "kfp-local", tmp_path, xs=list(range(6)), factor=1)
    assert r.succeeded, r.error
    assert (root.level, root.handlers) == (level, handlers)


# -- map defects found by ports (issue 24) --------------------------------------------------------
@pytest.mark.parametrize("backend", backend_params())
def test_an_item_input_the_map_leaves_unbound_takes_its_default(backend: str, tmp_path: Path) -> None:
    # flyte-local failed: flytekit gives an array node's bound inputs no default.
    r = _run(fp.defaults_unbound, backend, tmp_path, xs=["a", "b"])
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], "a-None-x,b-None-x")


@pytest.mark.parametrize("backend", backend_params())
def test_a_step_output_broadcast_to_every_item_arrives_as_itself(backend: str, tmp_path: Path) -> None:
    # kfp-local gave each item the loop item as `price` (kfp.local 2.17 replaces every
    # task-output input of a loop task with the item): 1*1 + 2*2 + 3*3 = 14.0.
    r = _run(fp.broadcast_output, backend, tmp_path, xs=[1, 2, 3])
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], 42.0)
    _exact(r.outputs["o1"], [3, 6, 9])


def test_kfp_cluster_ir_broadcasts_a_step_output_as_a_kfp_user_writes_it(tmp_path: Path) -> None:
    """The kfp-local rendering (the broadcast through the loop item) stays out of the cluster IR."""
    pytest.importorskip("kfp")
    import yaml

    doc = next(yaml.safe_load_all(_kfp_ir(tmp_path, "b", fp.broadcast_output)))
    root = doc["root"]["dag"]["tasks"]
    loop_name, loop = next((k, t) for k, t in root.items() if t["taskInfo"]["name"] == "times-map")
    assert loop["inputs"]["parameters"]["pipelinechannel--price-Output"]["taskOutputParameter"]["producerTask"] == "price"
    body = doc["components"][loop["componentRef"]["name"]]["dag"]["tasks"]
    assert body["times"]["inputs"]["parameters"]["price"]["componentInputParameter"] == "pipelinechannel--price-Output"
    enum = next(t for t in root.values() if t["taskInfo"]["name"] == "times-enumerate-items")
    assert set(enum["inputs"]["parameters"]) == {"items"}


def test_flyte_binds_a_defaulted_item_input_to_its_default() -> None:
    pytest.importorskip("flytekit")
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    models = serialize(spec_of(fp.defaults_unbound), project="p", domain="d", version="v1", image="img:1")
    (array,) = [n for m in models if isinstance(m, WorkflowSpec) for n in m.template.nodes if n.array_node is not None]
    bound = {b.var: b.binding for b in array.inputs}
    assert bound["mark"].scalar.primitive.string_value == "x"
    assert "note" in bound


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("pipeline", [fp.second_item_fails, fp.second_item_fails_serial], ids=["parallel", "serial"])
def test_a_failed_map_reports_the_same_items_attempts_and_name_everywhere(
        backend: str, pipeline: Any, tmp_path: Path) -> None:
    # flyte-local ran and counted 2 of the 4 items (flytekit stops at the first failure), the
    # attempts were 1/2/4, and local named the item (`second_fails[1]`) where the others named the step.
    r = _run(pipeline, backend, tmp_path, xs=[1, 2, 3, 4])
    assert r.status == F
    assert _statuses(r) == {"second_fails": F, "total": N}
    report = r.maps["second_fails"]
    assert (report.items, report.failed) == (4, [1])
    assert r.steps["second_fails"].attempts == 4  # every item ran once
    assert isinstance(r.error, il.StepFailed) and r.error.step == "second_fails" and r.error.attempts == 1
    assert "item 2" in r.error.reason
    receipt = json.loads(Path(r.receipt_path).read_text())
    step = next(s for s in receipt["steps"] if s["node"] == "second_fails")
    assert [(e["index"], e["node"], e["status"], e["attempts"]) for e in step["facts"]["map"]["entries"]] == [
        (0, "second_fails[0]", S, 1), (1, "second_fails[1]", F, 1), (2, "second_fails[2]", S, 1),
        (3, "second_fails[3]", S, 1)]


@pytest.mark.parametrize("backend", backend_params())
def test_a_map_with_failed_items_is_never_served_whole_from_the_cache(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # flyte-local served a tolerant map that had failed items from its cache on a rerun: the
    # failed items did not run again and RunResult.maps lacked the node (issue 31 item 1).
    runs = tmp_path / "runs.txt"
    monkeypatch.setenv(fp.RUNS, str(runs))
    first = _run(fp.tolerant_cached, backend, tmp_path)
    assert first.succeeded, first.error
    assert sorted(int(x) for x in runs.read_text().split()) == list(range(1, 9))
    runs.write_text("")
    second = _run(fp.tolerant_cached, backend, tmp_path)
    assert second.succeeded, second.error
    _exact(second.outputs["o0"], [0, 1, 2, 4, 5, 6])
    report = second.maps["cached_fragile"]
    assert report.failed == [3, 7]
    # Only succeeded items may come from the cache (each item on local; on flyte-local and
    # kfp-local a tolerant map's items are not cached one by one, so they all run again).
    assert set(report.cached) <= {0, 1, 2, 4, 5, 6}
    again = sorted(int(x) for x in runs.read_text().split())
    assert again == sorted({4, 8} | {i + 1 for i in range(8) if i not in report.cached})
    assert str(second.steps["cached_fragile"].status) == S


# -- resuming a run with maps (issue 25 item 5) -------------------------------------------------
def _resume(pipeline: Any, backend: str, tmp_path: Path, run_id: str, **params: Any) -> Any:
    return il.run(pipeline, backend=backend, workdir=tmp_path / "work", raise_on_failure=False, resume=run_id,
                  **params)


@pytest.mark.parametrize("backend", backend_params())
def test_resuming_a_tolerant_map_with_a_shorter_list_reports_only_its_items(backend: str, tmp_path: Path) -> None:
    # local reported the old run's failed items (failed=[3, 4], 5 entries for 3 items);
    # flyte-local and kfp-local failed the resumed run with an item not in its list.
    first = _run(fp.resume_tolerant, backend, tmp_path, xs=[1, 2, 3, -4, -5])
    assert first.succeeded, first.error
    assert first.maps["nonneg"].failed == [3, 4]
    again = _resume(fp.resume_tolerant, backend, tmp_path, first.run_id, xs=[1, 2, 3])
    assert again.succeeded, again.error
    _exact(again.outputs["o0"], [1, 2, 3])
    assert (again.maps["nonneg"].items, again.maps["nonneg"].failed) == (3, [])
    receipt = json.loads(Path(again.receipt_path).read_text())
    step = next(s for s in receipt["steps"] if s["node"] == "nonneg")
    assert [e["index"] for e in step["facts"]["map"]["entries"]] == [0, 1, 2]


@pytest.mark.parametrize("backend", backend_params())
def test_resuming_a_failed_map_with_a_shorter_list_runs_it(backend: str, tmp_path: Path) -> None:
    # local crashed: `min() arg is an empty sequence` (adapters/local/fanout.py).
    first = _run(fp.resume_strict, backend, tmp_path, xs=[1, -2])
    assert first.status == F and first.maps["nonneg"].failed == [1]
    again = _resume(fp.resume_strict, backend, tmp_path, first.run_id, xs=[1])
    assert again.succeeded, again.error
    _exact(again.outputs["o0"], [1])
    assert (again.maps["nonneg"].items, again.maps["nonneg"].failed) == (1, [])


@pytest.mark.parametrize("backend", backend_params())
def test_a_list_feeds_a_list_of_optionals_on_every_backend(backend: str, tmp_path: Path) -> None:
    # KFP compile refused it: the input travelled as JSON text, the producer's output as a KFP list.
    r = _run(fp.into_optional_list, backend, tmp_path)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [1, 2, 3])
    _exact(r.outputs["o1"], [2, 4, 6])


def test_kfp_compiles_a_list_into_a_list_of_optionals(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    import yaml

    doc = next(yaml.safe_load_all(_kfp_ir(tmp_path, "o", fp.into_optional_list)))
    assert doc["components"]["comp-kept-optional"]["inputDefinitions"]["parameters"]["parts"]["parameterType"] == "LIST"


@pytest.mark.parametrize("backend", backend_params())
def test_a_map_over_a_list_holding_nones_gets_each_none(backend: str, tmp_path: Path) -> None:
    # kfp compile refused the tolerant map's output as the loop's list (JSON text into a KFP list).
    r = _run(fp.over_optional_lists, backend, tmp_path)
    assert r.succeeded, r.error
    _exact(r.outputs["o0"], [3, 1, 7])
    _exact(r.outputs["o1"], [11, 1, 21])
