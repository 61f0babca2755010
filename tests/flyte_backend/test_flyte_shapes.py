"""Graph shapes on Flyte: nested il.when blocks, ordering-only edges, dataclass field bindings,
untyped JSON lists/dicts; run by flyte-local (same outcomes as the local reference backend)
and compiled (sub-workflows, upstream edges, attribute paths)."""

from __future__ import annotations

from pathlib import Path

import pytest
from flyte_pipelines.shapes import Report, field_gate, shapes
from flyteidl.admin import workflow_pb2
from flyteidl.core import types_pb2

import interlock as il
from interlock.adapters.flyte.types import from_flyte, python_type, to_flyte
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.types import TypeSpec


@pytest.mark.parametrize("n", [1, 2, 3])
def test_nested_gates_match_the_local_backend(tmp_path: Path, n: int) -> None:
    flyte = il.run(shapes, backend="flyte-local", workdir=tmp_path / "f", n=n)
    local = il.run(shapes, backend="local", workdir=tmp_path / "l", n=n)
    assert {k: v.status for k, v in flyte.steps.items()} == {k: v.status for k, v in local.steps.items()}
    assert flyte.outputs["o0"] == local.outputs["o0"] == Report(score=2.0 * n + 1, passed=2 * n + 1 > 3, tags=[f"n{n}"])
    expected_inner = "succeeded" if 2 * n + 1 > 5 else "skipped"  # gate-2: score > limit (5.0)
    assert flyte.steps["publish_big"].status == expected_inner


def test_nested_blocks_compile_to_nested_subworkflows(tmp_path: Path) -> None:
    files = il.compile(shapes, backend="flyte", out=tmp_path, project="p", domain="d", version="v1", image="img:1")
    [path] = [f for f in files if f.name.endswith("_flyte-shapes_2.pb")]
    wf = workflow_pb2.WorkflowSpec()
    wf.ParseFromString(path.read_bytes())
    nodes = {n.id: n for n in wf.template.nodes}
    assert list(nodes) == ["prepare", "score", "passed", "gate-1"]
    assert list(nodes["score"].upstream_node_ids) == ["prepare"]  # after=ready: ordering without data
    subs = {s.id.name: s for s in wf.sub_workflows}
    assert set(subs) == {"flyte-shapes.gate-1", "flyte-shapes.gate-2"}
    outer = subs["flyte-shapes.gate-1"]
    assert [n.id for n in outer.nodes] == ["publish", "big-enough", "gate-2"]
    assert outer.nodes[-1].branch_node.if_else.case.then_node.workflow_node.sub_workflow_ref.name == "flyte-shapes.gate-2"
    # report.score is a field of a dataclass output: bound with an attribute path, not a copy step.
    branch_then = nodes["gate-1"].branch_node.if_else.case.then_node
    [binding] = [b for b in branch_then.inputs if b.var == "score__o0__score"]
    assert binding.binding.promise.node_id == "score"
    assert [p.string_value for p in binding.binding.promise.attr_path] == ["score"]


def test_gate_on_a_dataclass_field_is_refused_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(PipelineDefinitionError, match="not a field of a dataclass output"):
        il.compile(field_gate, backend="flyte", out=tmp_path, project="p", domain="d", version="v1", image="img:1")


def test_type_mapping_and_value_round_trip(tmp_path: Path) -> None:
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.type_engine import TypeEngine

    untyped = TypeSpec("list")
    assert python_type(untyped) is str  # never pickled: JSON text
    assert TypeEngine.to_literal_type(python_type(untyped)).simple == types_pb2.STRING
    assert from_flyte(to_flyte([1, {"a": 2}], untyped), untyped) == [1, {"a": 2}]
    assert TypeEngine.to_literal_type(python_type(TypeSpec("dict", args=(TypeSpec("str"), TypeSpec("int"))))).map_value_type.simple == types_pb2.INTEGER
    optional = TypeEngine.to_literal_type(python_type(TypeSpec("str", optional=True)))
    assert optional.union_type is not None

    model_t = TypeSpec("model")
    src = il.Model(tmp_path / "m", {"auc": 0.9})
    src.path.mkdir()
    (src.path / "w.bin").write_bytes(b"\x00\x01")
    as_dir = to_flyte(src, model_t, tmp_path)
    ctx = FlyteContextManager.current_context()
    lit = TypeEngine.to_literal(ctx, as_dir, python_type(model_t), TypeEngine.to_literal_type(python_type(model_t)))
    assert lit.hash  # content hash for Flyte's cache key
    back = from_flyte(as_dir, model_t)
    assert isinstance(back, il.Model) and back.metadata == {"auc": 0.9}
    assert (back.path / "w.bin").read_bytes() == b"\x00\x01"
    metrics = from_flyte({"auc": 1}, TypeSpec("metrics"))
    assert isinstance(metrics, il.Metrics) and metrics["auc"] == 1.0
