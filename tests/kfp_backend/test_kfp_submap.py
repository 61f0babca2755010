"""``il.map`` over a sub-pipeline compiled for KFP (issue 24): a ``dsl.ParallelFor`` around the
call's pipeline component over its enumerate-items task, the body's tasks taking the item,
readers fed by the loop's collected outputs; the IR loaded back through kfp; what KFP cannot
render refused at compile, naming the call, with a hint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conformance import submap_pipelines as sp
from kfp import components

import interlock as il
from interlock.adapters.kfp.compile import compile_pipeline
from interlock.adapters.kfp.node_task import NodeTask
from interlock.adapters.kfp.submap import CALL_ITEM_ARG
from interlock.core.base.errors import PipelineDefinitionError


def _ir(pipeline: Any, tmp_path: Path) -> dict[str, Any]:
    path = compile_pipeline(il.spec(pipeline), tmp_path / "ir.yaml")
    components.load_component_from_file(str(path))  # kfp reads it back
    return next(iter(yaml.safe_load_all(path.read_text())))


def _loop(ir: dict[str, Any], dag: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = next(k for k, t in dag["tasks"].items() if "parameterIterator" in t)
    return name, dag["tasks"][name]


def test_a_mapped_call_is_a_parallel_for_around_its_pipeline_component(tmp_path: Path) -> None:
    ir = _ir(sp.sweep_strict, tmp_path)
    root = ir["root"]["dag"]
    assert "trial-enumerate-items" in root["tasks"]
    name, loop = _loop(ir, root)
    assert loop["iteratorPolicy"]["parallelismLimit"] == 1  # concurrency=1
    assert loop["parameterIterator"]["items"]["inputParameter"].endswith("trial-enumerate-items-Output")
    assert loop["dependentTasks"] == ["trial-enumerate-items"]
    inner = ir["components"][loop["componentRef"]["name"]]["dag"]["tasks"]
    assert inner["trial"]["componentRef"]["name"] == "comp-trial"  # the body's nested pipeline
    assert CALL_ITEM_ARG in inner["trial"]["inputs"]["parameters"]
    body = ir["components"]["comp-trial"]["dag"]["tasks"]
    assert set(body) == {"trial-fit", "trial-score"}
    for t in body.values():  # every body task takes the item: it runs as <call>.<step>[i]
        assert t["inputs"]["parameters"][CALL_ITEM_ARG]["componentInputParameter"] == CALL_ITEM_ARG
    # best reads the loop's collected output (dsl.Collected)
    fed = root["tasks"]["best"]["inputs"]["parameters"]
    assert any(p.get("taskOutputParameter", {}).get("producerTask") == name for p in fed.values())


def test_each_body_task_knows_which_ports_the_item_feeds(tmp_path: Path) -> None:
    spec = il.spec(sp.sweep_zip)
    fit = NodeTask.of(spec, "prep-score.trial.fit")  # a plain call inside the mapped body
    assert fit.call_item == {"lr": 0, "data": 1}  # il.zip: the item, then the other list's element
    assert "lr" not in fit.declared and "data" not in fit.declared
    assert NodeTask.loads(fit.dumps()).call_item == fit.call_item
    assert NodeTask.of(spec, "best").call_item is None
    _ir(sp.sweep_zip, tmp_path)


@pytest.mark.parametrize("pipeline, match", [
    (sp.sweep_tolerant, r"tolerate=1.*'trial'"),
])
def test_what_kfp_cannot_render_is_refused_at_compile_with_a_hint(pipeline: Any, match: str, tmp_path: Path) -> None:
    with pytest.raises(PipelineDefinitionError, match=match) as err:
        compile_pipeline(il.spec(pipeline), tmp_path / "ir.yaml")
    assert err.value.hint and "local" in err.value.hint


def test_fields_of_a_mapped_call_reach_each_body_task_as_the_record(tmp_path: Path) -> None:
    spec = il.spec(sp.fields_subpipeline)
    combine = NodeTask.of(spec, "pair-trial.combine")
    assert combine.call_item == {"a": "a", "b": "b"}  # fields=: the record's field each port reads
    assert "a" not in combine.declared and "b" not in combine.declared
    assert NodeTask.loads(combine.dumps()).call_item == combine.call_item
    assert NodeTask.of(spec, "pair-trial.score").call_item == {"bonus": "b"}
    ir = _ir(sp.fields_subpipeline, tmp_path)
    enum = ir["deploymentSpec"]["executors"]["exec-pair-trial-enumerate-items"]["container"]["command"][-1]
    assert "has no field" in enum and "['a', 'b']" in enum  # every record is checked before any item


def test_fields_of_a_step_map_come_in_the_loop_item(tmp_path: Path) -> None:
    spec = il.spec(sp.fields_renamed)
    task = NodeTask.of(spec, "renamed")
    assert task.map_item == "x" and task.map_fields == (("a", "x"), ("b", "y"))
    assert "y" not in task.declared  # its field comes in the record, not as an input of its own
    assert NodeTask.loads(task.dumps()).map_fields == task.map_fields
    ir = _ir(sp.fields_renamed, tmp_path)
    _, loop = _loop(ir, ir["root"]["dag"])
    inner = ir["components"][loop["componentRef"]["name"]]["dag"]["tasks"]
    assert set(inner["renamed"]["inputs"]["parameters"]) == {"x"}  # the item: the whole record


def test_a_step_map_inside_a_mapped_call_is_a_parallel_for_in_its_pipeline_component(tmp_path: Path) -> None:
    ir = _ir(sp.grid, tmp_path)
    _, outer = _loop(ir, ir["root"]["dag"])
    body = ir["components"]["comp-grid-row"]["dag"]
    assert "grid-row-square-enumerate-items" in body["tasks"]
    _, inner = _loop(ir, body)  # the nested ParallelFor, inside the call's component
    square = ir["components"][inner["componentRef"]["name"]]["dag"]["tasks"]["grid-row-square"]
    assert CALL_ITEM_ARG in square["inputs"]["parameters"]  # the call's item too: it runs as square[i][j]
    task = NodeTask.of(il.spec(sp.grid), "grid-row.square")
    assert task.map_item == "x" and task.call_item == {}


def test_a_mapped_call_inside_a_mapped_call_carries_the_outer_item_in_each_inner_one(tmp_path: Path) -> None:
    spec = il.spec(sp.nested)
    add = NodeTask.of(spec, "outer-pair.inner-pair.add")
    assert add.call_item == {"a": 0, "b": 1}  # the outer item's values first, then the inner's
    ir = _ir(sp.nested, tmp_path)
    body = ir["components"]["comp-outer-pair"]
    assert body["outputDefinitions"]["parameters"]["Output"]["parameterType"] == "LIST"  # the inner loop's
    assert "outer-pair-inner-pair-enumerate-items" in body["dag"]["tasks"]
    enum = body["dag"]["tasks"]["outer-pair-inner-pair-enumerate-items"]["inputs"]["parameters"]
    assert enum["outer"]["componentInputParameter"] == CALL_ITEM_ARG  # each inner item carries the outer one
    _, inner = _loop(ir, body["dag"])  # the nested ParallelFor, inside the outer call's component
    assert inner["parameterIterator"]["items"]["inputParameter"].endswith("outer-pair-inner-pair-enumerate-items-Output")


def test_fields_of_a_mapped_call_inside_a_mapped_call_are_refused_with_a_hint(tmp_path: Path) -> None:
    @il.pipeline(name="fields-outer")
    def fields_outer(n: int) -> list[float]:
        return il.map(sp.pair_trial, over=sp.pairs(n=n), fields=True)

    @il.pipeline(name="fields-nested")
    def fields_nested(ns: list[int] = [1, 2]):  # noqa: B006 - recorded, never mutated
        return il.map(fields_outer, over=ns)

    with pytest.raises(PipelineDefinitionError, match=r"fields=.*'fields-outer'") as err:
        compile_pipeline(il.spec(fields_nested), tmp_path / "ir.yaml")
    assert err.value.hint and "local" in err.value.hint
