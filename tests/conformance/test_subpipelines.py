"""Sub-pipelines (an @il.pipeline called in another) on every backend: identical outputs (types
included) and step statuses on local, flyte-local and kfp-local, a real Flyte sub-workflow and
a KFP nested DAG (pipeline-as-component) in the compiled artifacts, and build-time errors that
name the outer pipeline, the sub-pipeline and the port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from backends import runnable_backends

import interlock as il
from conformance import sub_pipelines as sp
from interlock.core.model.pipeline_spec import PipelineSpec

BACKENDS = runnable_backends()


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[str, dict[str, Any], dict[str, str]]:
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, **params)
    outputs = {k: (type(v).__name__, v) for k, v in r.outputs.items()}
    return str(r.status), outputs, {k: str(s.status) for k, s in r.steps.items()}


def _agree(pipeline: Any, tmp_path: Path, **params: Any) -> tuple[str, dict, dict]:
    results = {b: _run(pipeline, b, tmp_path, **params) for b in BACKENDS}
    reference = results["local"]
    for backend, got in results.items():
        assert got == reference, f"{backend} differs from local"
    return reference


def _flyte(pipeline: Any, tmp_path: Path) -> Any:
    from flyteidl.admin import workflow_pb2

    files = il.compile(pipeline, backend="flyte", out=tmp_path / "flyte", project="p", domain="d",
                       version="v1", image="img:1")
    [path] = [f for f in files if f.name.endswith(f"_{pipeline.name}_2.pb")]
    wf = workflow_pb2.WorkflowSpec()
    wf.ParseFromString(path.read_bytes())
    return wf


def _kfp(pipeline: Any, tmp_path: Path) -> tuple[dict[str, Any], Any]:
    """The IR as YAML, and as kfp loads it back (its PipelineSpec protobuf)."""
    from kfp import components

    [path] = il.compile(pipeline, backend="kfp", out=tmp_path / "kfp")
    ir = next(iter(yaml.safe_load_all(path.read_text())))
    return ir, components.load_component_from_file(str(path)).pipeline_spec


def _dag_tasks(pb: Any, comp: str) -> dict[str, str]:
    """A DAG component's tasks (loaded through kfp), each with its component's name."""
    return {k: t.component_ref.name for k, t in pb.components[comp].dag.tasks.items()}


def test_the_same_sub_pipeline_twice_with_different_inputs(tmp_path: Path) -> None:
    status, outputs, steps = _agree(sp.twice, tmp_path)
    assert status == "succeeded"
    assert outputs == {"o0": ("int", 390), "o1": ("str", "prep:10"), "o2": ("str", "prep:39")}
    assert set(steps) == {"sub-prep.measure", "sub-prep.scale", "sub-prep.label", "prep-b.measure",
                          "prep-b.scale", "prep-b.label", "both"}
    assert set(steps.values()) == {"succeeded"}


def test_the_same_sub_pipeline_twice_compiles_to_two_sub_workflow_nodes_and_two_nested_dags(tmp_path: Path) -> None:
    wf = _flyte(sp.twice, tmp_path)
    calls = {n.id: n.workflow_node.sub_workflow_ref.name for n in wf.template.nodes if n.HasField("workflow_node")}
    assert calls == {"sub-prep": "conf-sub-twice.sub-prep", "prep-b": "conf-sub-twice.prep-b"}
    subs = {s.id.name: s for s in wf.sub_workflows}
    assert set(calls.values()) <= set(subs)
    inner = subs["conf-sub-twice.prep-b"]
    assert [n.id for n in inner.nodes] == ["prep-b-measure", "prep-b-scale", "prep-b-label"]
    assert [o.var for o in inner.outputs] == ["size", "tag"]  # the sub-pipeline's own outputs
    assert set(inner.interface.inputs.variables) == {"text"}  # its parameter (factor=3 is a constant inside)

    ir, pb = _kfp(sp.twice, tmp_path)
    root = ir["root"]["dag"]["tasks"]
    assert root["sub-prep"]["componentRef"]["name"] == "comp-sub-prep"
    assert root["prep-b"]["componentRef"]["name"] == "comp-prep-b"
    assert _dag_tasks(pb, "comp-prep-b") == {
        "prep-b-measure": "comp-prep-b-measure", "prep-b-scale": "comp-prep-b-scale", "prep-b-label": "comp-prep-b-label"}
    assert sorted(pb.components["comp-prep-b"].output_definitions.parameters) == ["size", "tag"]  # a protobuf map: no order
    # "both" reads each call's output through the nested DAG's output
    both = root["both"]["inputs"]["parameters"]
    assert both["x"]["taskOutputParameter"] == {"producerTask": "sub-prep", "outputParameterKey": "size"}


def test_nested_two_deep(tmp_path: Path) -> None:
    status, outputs, steps = _agree(sp.nested, tmp_path)
    assert status == "succeeded" and outputs == {"o0": ("str", "nested:60")}
    assert steps["sub-middle.sub-prep.measure"] == steps["sub-middle.scale"] == "succeeded"

    wf = _flyte(sp.nested, tmp_path)
    subs = {s.id.name: s for s in wf.sub_workflows}
    middle = subs["conf-sub-nested.sub-middle"]
    [call] = [n for n in middle.nodes if n.HasField("workflow_node")]
    assert call.workflow_node.sub_workflow_ref.name == "conf-sub-nested.sub-middle.sub-prep"
    assert "conf-sub-nested.sub-middle.sub-prep" in subs

    _, pb = _kfp(sp.nested, tmp_path)
    assert _dag_tasks(pb, "comp-sub-middle")["sub-middle-sub-prep"] == "comp-sub-middle-sub-prep"
    assert pb.components["comp-sub-middle-sub-prep"].HasField("dag")


@pytest.mark.parametrize(("text", "taken"), [("hello world", "long"), ("hi", "short")])
def test_a_branch_with_a_value_inside_a_sub_pipeline(tmp_path: Path, text: str, taken: str) -> None:
    status, outputs, steps = _agree(sp.branch_inside, tmp_path, text=text)
    assert status == "succeeded" and outputs == {"o0": ("str", f"{taken}:{len(text)}")}
    other = {"long", "short"} - {taken}
    assert steps[f"sub-branchy.{taken}"] == "succeeded" and steps[f"sub-branchy.{other.pop()}"] == "skipped"


def test_a_branch_inside_a_sub_pipeline_compiles_inside_its_construct(tmp_path: Path) -> None:
    wf = _flyte(sp.branch_inside, tmp_path)
    sub = {s.id.name: s for s in wf.sub_workflows}["conf-sub-branch.sub-branchy"]
    assert any(n.HasField("branch_node") for n in sub.nodes)  # the conditional is inside the sub-workflow
    assert not any(n.HasField("branch_node") for n in wf.template.nodes)

    _, pb = _kfp(sp.branch_inside, tmp_path)
    inner = _dag_tasks(pb, "comp-sub-branchy")
    assert "condition-branches-1" in inner  # dsl.If/dsl.Else inside the nested DAG
    assert pb.components["comp-sub-branchy"].dag.outputs.parameters["Output"].HasField("value_from_oneof") \
        or "condition-branches-1" in str(pb.components["comp-sub-branchy"].dag.outputs)


def test_a_map_inside_a_sub_pipeline(tmp_path: Path) -> None:
    status, outputs, steps = _agree(sp.map_inside, tmp_path)
    assert status == "succeeded" and outputs == {"o0": ("int", 6)}

    wf = _flyte(sp.map_inside, tmp_path)
    sub = {s.id.name: s for s in wf.sub_workflows}["conf-sub-map.sub-mapper"]
    assert [n.id for n in sub.nodes if n.HasField("array_node")] == ["sub-mapper-measure"]

    _, pb = _kfp(sp.map_inside, tmp_path)
    inner = _dag_tasks(pb, "comp-sub-mapper")
    loops = [name for name, comp in inner.items() if pb.components[comp].dag.tasks and "for-loop" in name]
    assert loops, inner  # dsl.ParallelFor inside the nested DAG


def test_a_map_output_returned_by_a_sub_pipeline(tmp_path: Path) -> None:
    status, outputs, _ = _agree(sp.map_out, tmp_path)
    assert status == "succeeded" and outputs == {"o0": ("int", 6), "o1": ("list", [1, 2, 3])}
    _, pb = _kfp(sp.map_out, tmp_path)  # the nested DAG's output is the loop's dsl.Collected
    out = pb.components["comp-sub-sizes"].dag.outputs.parameters["Output"]
    assert out.value_from_parameter.producer_subtask.startswith("for-loop")
    wf = _flyte(sp.map_out, tmp_path)
    sub = {s.id.name: s for s in wf.sub_workflows}["conf-sub-map-out.sub-sizes"]
    assert [o.var for o in sub.outputs] == ["o0"]


@pytest.mark.parametrize("go", [True, False])
def test_a_sub_pipeline_inside_a_branch(tmp_path: Path, go: bool) -> None:
    status, outputs, steps = _agree(sp.in_branch, tmp_path, go=go)
    assert status == "succeeded" and outputs == {"o0": ("int", 5)}
    inner = ["sub-prep.measure", "sub-prep.scale", "sub-prep.label", "after"]
    assert [steps[n] for n in inner] == ["succeeded" if go else "skipped"] * 4


def test_a_sub_pipeline_inside_a_branch_compiles_inside_the_condition(tmp_path: Path) -> None:
    wf = _flyte(sp.in_branch, tmp_path)
    subs = {s.id.name: s for s in wf.sub_workflows}
    block = subs["conf-sub-in-branch.gate-1"]
    assert [n.workflow_node.sub_workflow_ref.name for n in block.nodes if n.HasField("workflow_node")] == [
        "conf-sub-in-branch.sub-prep"]

    ir, pb = _kfp(sp.in_branch, tmp_path)
    [cond] = [c for c in ir["components"] if c.startswith("comp-condition")]
    assert _dag_tasks(pb, cond)["sub-prep"] == "comp-sub-prep"


def test_a_failing_step_inside_a_sub_pipeline_fails_the_run(tmp_path: Path) -> None:
    status, outputs, steps = _agree(sp.fails_inside, tmp_path)
    assert status == "failed" and outputs == {}
    assert steps == {"sub-fails.measure": "succeeded", "sub-fails.explode": "failed", "label": "not-run"}


@pytest.mark.parametrize(("text", "ran"), [("abcd", "succeeded"), ("ab", "skipped")])
def test_fields_gates_and_outputs_across_the_call_boundary(tmp_path: Path, text: str, ran: str) -> None:
    """A field of the call's dataclass output read outside it, a block outside on its output (on
    kfp-local, where conditions resolve only on outputs named "Output", this one ran as not-run
    before it went through a selector), a call with no outputs, a dataclass pipeline output."""
    status, outputs, steps = _agree(sp.edge_cases, tmp_path, text=text)
    assert status == "succeeded"
    assert outputs == {"o0": ("int", 2 * len(text)), "o1": ("Report", sp.Report(3 * len(text), f"r{len(text)}"))}
    assert steps["from-field"] == ran and steps["sub-silent.record"] == steps["sub-edges.gated"] == "succeeded"


def test_a_block_on_a_parameter_the_call_binds_to_a_constant_is_refused() -> None:
    @il.pipeline(name="const-limit")
    def p(text: str = "abcd"):
        r, n = sp.edges(text=text)  # limit left at its default: known while building
        return n

    with pytest.raises(il.PipelineDefinitionError, match="compares only values known while the pipeline is built") as e:
        il.spec(p)
    assert "limit=limit" in (e.value.hint or "") and e.value.step == "sub-edges"


def test_receipt_and_status_name_the_inner_steps_by_call(tmp_path: Path) -> None:
    import json

    r = il.run(sp.twice, backend="local", workdir=tmp_path)
    receipt = json.loads(Path(r.receipt_path).read_text())
    rows = {row["node"]: row["step"] for row in receipt["steps"]}
    assert rows["sub-prep.measure"] == rows["prep-b.measure"] == "measure"  # one step, two calls


def test_the_spec_keeps_the_calls_and_round_trips(tmp_path: Path) -> None:
    spec = il.spec(sp.nested)
    assert [(c.name, c.pipeline, c.parent) for c in spec.subs] == [
        ("sub-middle.sub-prep", "sub-prep", "sub-middle"), ("sub-middle", "sub-middle", None)]
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert il.spec(PipelineSpec.loads(spec.dumps())) == spec


def test_interlock_backends_lists_the_rendering(tmp_path: Path) -> None:
    from interlock.core.backend.protocol import get_backend

    for name, word in (("local", "native"), ("flyte", "sub-workflow"), ("kfp", "pipeline-as-component")):
        caps = get_backend(name).capabilities()
        assert word in caps.features["subpipeline"]
        assert caps.features["subpipeline.cache"].startswith("unsupported as a unit")


# -- build-time errors: the outer pipeline, the sub-pipeline and the port ---------------------------
def test_a_mistyped_argument_names_outer_inner_and_port() -> None:
    @il.pipeline(name="bad-arg")
    def bad(n: int = 1):
        return sp.prep(text=n)

    with pytest.raises(il.PipelineDefinitionError) as e:
        il.spec(bad)
    msg = str(e.value)
    assert "pipeline 'bad-arg'" in msg and "sub-pipeline 'sub-prep'" in msg and "port 'text'" in msg
    assert "type mismatch" in msg and e.value.port == "text"
    assert msg.count("pipeline 'bad-arg'") == 1  # said once, not repeated from the inner error


def test_a_bad_wire_inside_the_sub_pipeline_names_outer_inner_step_and_port() -> None:
    @il.pipeline(name="sub-broken")
    def broken(text: str) -> str:
        n = sp.measure(text=text)
        return sp.label(x=text, prefix=n)  # x: int <- str, prefix: str <- int

    @il.pipeline(name="uses-broken")
    def outer(text: str = "a"):
        return broken(text=text)

    with pytest.raises(il.PipelineDefinitionError) as e:
        il.spec(outer)
    msg = str(e.value)
    assert "pipeline 'uses-broken'" in msg and "sub-pipeline 'sub-broken'" in msg
    assert e.value.step == "sub-broken.label" and e.value.port == "x"


def test_a_sub_pipeline_output_wired_to_the_wrong_type() -> None:
    @il.pipeline(name="bad-out")
    def bad(text: str = "a"):
        s = sp.prep(text=text)
        return sp.scale(x=s.tag, factor=1)

    with pytest.raises(il.PipelineDefinitionError) as e:
        il.spec(bad)
    msg = str(e.value)
    assert "output sub-prep.label.o0" in msg and "port 'x'" in msg and "pipeline 'bad-out'" in msg


def test_unknown_and_missing_parameters_are_refused() -> None:
    @il.pipeline(name="unknown-arg")
    def unknown(text: str = "a"):
        return sp.prep(text=text, nope=1)

    with pytest.raises(il.PipelineDefinitionError, match="unknown argument.*'nope'"):
        il.spec(unknown)

    @il.pipeline(name="missing-arg")
    def missing(text: str = "a"):
        return sp.prep(factor=2)

    with pytest.raises(il.PipelineDefinitionError, match="missing required parameter") as e:
        il.spec(missing)
    assert e.value.port == "text"


def test_a_second_call_needs_its_own_name() -> None:
    @il.pipeline(name="twice-same-name")
    def p(text: str = "a"):
        a = sp.prep.named("x")(text=text)
        b = sp.prep.named("x")(text=text)
        return a.size, b.size

    with pytest.raises(il.PipelineDefinitionError, match="duplicate node name"):
        il.spec(p)


def test_a_finally_inside_a_sub_pipeline_runs_after_the_call(tmp_path: Path) -> None:
    # Refused at build time before; now scoped to the call: a block over the call's nodes.
    spec = il.spec(sp.finally_inside)
    [block] = spec.finally_blocks
    assert block.node.name == "sub-with-finally.notify" and block.members == ("sub-with-finally.measure",)
    assert spec.finally_ is None and spec.subs[0].finally_ == "sub-with-finally.notify"
    status, outputs, steps = _agree(sp.finally_inside, tmp_path)
    assert status == "succeeded" and outputs == {"o0": ("int", 1)}
    assert steps == {"sub-with-finally.measure": "succeeded", "sub-with-finally.notify": "succeeded"}


def test_a_pipeline_called_outside_a_pipeline_body_is_still_refused() -> None:
    with pytest.raises(il.PipelineDefinitionError, match="not called directly"):
        sp.prep(text="x")


def test_interlock_graph_shows_the_calls() -> None:
    from interlock.core.report import render

    spec = il.spec(sp.nested)
    assert "[sub-middle: sub-pipeline sub-middle(text<-pipeline parameter 'text')" in render.text(spec)
    m = render.mermaid(spec).splitlines()
    outer = m.index('  subgraph sub-middle["sub-middle: sub-middle"]')
    inner = m.index('    subgraph sub-middle_sub-prep["sub-middle.sub-prep: sub-prep"]')
    assert outer < inner and '      n0["sub-middle.sub-prep.measure"]' in m


def test_a_pipeline_that_calls_itself_is_refused() -> None:
    @il.pipeline(name="loops")
    def loops(text: str = "a"):
        return again(text=text)

    @il.pipeline(name="again")
    def again(text: str) -> int:
        return loops(text=text)

    with pytest.raises(il.PipelineDefinitionError, match="calls itself"):
        il.spec(loops)


def test_steps_inside_a_sub_pipeline_cache_across_runs_on_every_backend(tmp_path: Path) -> None:
    for backend in BACKENDS:
        runs = [il.run(sp.cached, backend=backend, workdir=tmp_path / backend) for _ in range(2)]
        assert [r.outputs for r in runs] == [{"o0": 6}, {"o0": 6}], backend
        assert [str(r.steps["sub-cached.slow_measure"].status) for r in runs] == ["succeeded", "cached"], backend
        assert str(runs[1].steps["sub-cached.scale"].status) == "succeeded", backend  # no cache policy
