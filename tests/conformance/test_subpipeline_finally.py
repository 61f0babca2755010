"""il.finally_ inside a sub-pipeline (issue 10: "a branch and a finally inside a sub-pipeline"):
scoped to each call of the sub-pipeline, it runs after the call's steps whatever their outcome and
receives the call's il.RunStatus (not the outer pipeline's); a failed body still fails the run.
Same statuses, outputs and RunStatus on local, flyte-local and kfp-local; Flyte compiles the
call's sub-workflow with a failure node, KFP an ExitHandler inside the call's nested pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from backends import runnable_backends
from doc_blocks import first_block_after

import interlock as il
from conformance import subpipeline_finally_pipelines as sfp
from interlock.core.backend.protocol import available_backends
from interlock.core.base.errors import PipelineDefinitionError

BACKENDS = runnable_backends()
ERROR = "FATAL: unclassified ValueError: bad input {}"


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[Any, ...]:
    out = tmp_path / f"seen-{backend}"
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, out=str(out), **params)
    seen = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    outputs = {k: (type(v).__name__, v) for k, v in r.outputs.items()}
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, outputs, seen


def _agree(pipeline: Any, tmp_path: Path, backends: list[str] = BACKENDS, **params: Any) -> tuple[Any, ...]:
    results = {b: _run(pipeline, b, tmp_path, **params) for b in backends}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    return results["local"]


def _status(label: str, status: str = "succeeded", failed: list[str] | None = None, error: str = "") -> dict:
    return {"label": label, "status": status, "failed_steps": failed or [], "error": error, "type": "RunStatus"}


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_the_finally_sees_the_call_s_status_on_every_backend(tmp_path: Path, fail: bool) -> None:
    status, steps, outputs, seen = _agree(sfp.once, tmp_path, fail=fail)
    assert steps["sf-work.cleanup"] == "succeeded" and steps["first"] == "succeeded"
    if fail:
        assert status == "failed" and outputs == {}  # the finally step does not swallow the failure
        assert steps["sf-work.maybe_fail"] == "failed"
        assert seen == {"once": _status("once", "failed", ["sf-work.maybe_fail"], ERROR.format(102))}
    else:
        assert status == "succeeded" and outputs == {"o0": ("int", 101)}
        assert seen == {"once": _status("once")}


def test_a_sub_pipeline_called_twice_runs_two_finally_steps_each_with_its_status(tmp_path: Path) -> None:
    status, steps, _, seen = _agree(sfp.twice, tmp_path, fail_b=True)
    assert status == "failed"
    assert steps["sf-work.cleanup"] == steps["work-b.cleanup"] == "succeeded"
    assert seen == {"a": _status("a"), "b": _status("b", "failed", ["work-b.maybe_fail"], ERROR.format(2))}


@pytest.mark.parametrize(("x", "fail", "taken"), [(1, False, "small"), (5, False, "big"), (5, True, "big")],
                         ids=["not-taken", "taken", "taken-fails"])
def test_a_branch_and_a_finally_inside_a_sub_pipeline(tmp_path: Path, x: int, fail: bool, taken: str) -> None:
    status, steps, _, seen = _agree(sfp.branch, tmp_path, x=x, fail=fail)
    other = "big" if taken == "small" else "small"
    assert steps[f"sf-branchy.{other}"] == "skipped" and steps["sf-branchy.cleanup"] == "succeeded"
    if fail:
        assert status == "failed" and steps["sf-branchy.big"] == "failed"
        assert seen == {"branchy": _status("branchy", "failed", ["sf-branchy.big"], ERROR.format(6))}
    else:
        assert status == "succeeded" and steps[f"sf-branchy.{taken}"] == "succeeded"
        assert seen == {"branchy": _status("branchy")}


def test_a_sub_pipeline_with_a_finally_inside_an_outer_when_block(tmp_path: Path) -> None:
    status, steps, _, seen = _agree(sfp.in_when, tmp_path / "taken", fail=True)
    assert status == "failed" and steps["sf-work.cleanup"] == "succeeded"
    assert seen == {"when": _status("when", "failed", ["sf-work.maybe_fail"], ERROR.format(2))}
    # Not taken: the call never starts (no sub-workflow, no nested DAG), so neither does its finally,
    # listed as skipped with the call's steps.
    status, steps, _, seen = _agree(sfp.in_when, tmp_path / "closed", go=False)
    assert status == "succeeded" and seen == {}
    assert steps == {"sf-work.prepare": "skipped", "sf-work.maybe_fail": "skipped", "sf-work.cleanup": "skipped"}


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_a_finally_block_inside_a_sub_pipeline(tmp_path: Path, fail: bool) -> None:
    status, steps, _, seen = _agree(sfp.block, tmp_path, fail=fail)
    assert steps["sf-blocky.block-cleanup"] == steps["sf-blocky.head"] == "succeeded"
    if fail:
        assert status == "failed" and steps["sf-blocky.shout"] == "not-run"
        assert seen == {"block": _status("block", "failed", ["sf-blocky.maybe_fail"], ERROR.format(2))}
    else:
        assert status == "succeeded" and seen == {"block": _status("block")}


def test_the_caller_s_finally_and_the_sub_pipeline_s_each_see_their_scope(tmp_path: Path) -> None:
    status, steps, _, seen = _agree(sfp.with_outer, tmp_path, fail=True)
    assert status == "failed" and steps["sf-work.cleanup"] == steps["run-cleanup"] == "succeeded"
    assert seen["sub"] == seen["run"] | {"label": "sub"}  # both failed through the call's step


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_an_output_of_the_call_read_after_it(tmp_path: Path, fail: bool) -> None:
    status, steps, outputs, seen = _agree(sfp.read_after, tmp_path, fail=fail)
    assert steps["sf-returning.cleanup"] == "succeeded"
    if fail:
        assert status == "failed" and steps["after"] == "not-run"
        assert seen == {"returning": _status("returning", "failed", ["sf-returning.maybe_fail"], ERROR.format(1))}
    else:
        assert status == "succeeded" and outputs == {"o0": ("int", 102)} and seen == {"returning": _status("returning")}
    status, _, outputs, _ = _agree(sfp.as_output, tmp_path / "out")  # returned by the caller
    assert status == "succeeded" and outputs == {"o0": ("int", 2)}


def test_kfp_runs_the_finally_after_the_body_s_nested_pipeline_when_the_call_s_outputs_are_read(
        tmp_path: Path) -> None:
    # KFP refuses a nested pipeline's outputs from inside its dsl.ExitHandler; its alternative to an
    # exit task, a task with .ignore_upstream_failure() after one upstream task, lets them out.
    pytest.importorskip("kfp")
    ir, pb = _kfp(sfp.read_after, tmp_path)
    assert set(ir["root"]["outputDefinitions"]["parameters"]) == {"Output"}
    tasks = pb.components["comp-sf-returning"].dag.tasks
    assert {t.component_ref.name for t in tasks.values()} == {"comp-sf-returning-body", "comp-sf-returning-cleanup-finally"}
    fin = next(t for t in tasks.values() if t.task_info.name == "sf-returning.cleanup")
    assert fin.trigger_policy.strategy == fin.trigger_policy.ALL_UPSTREAM_TASKS_COMPLETED
    [body] = fin.dependent_tasks
    assert tasks[body].component_ref.name == "comp-sf-returning-body"
    assert fin.inputs.parameters["status"].task_final_status.producer_task == body
    assert set(pb.components["comp-sf-returning"].output_definitions.parameters) == {"Output"}  # declared (KFP's name for one unnamed output): it escapes
    inner = pb.components["comp-sf-returning-body"].dag.tasks
    assert {t.task_info.name for t in inner.values()} == {"sf-returning.maybe_fail"}


def test_an_output_made_in_a_finally_block_of_the_sub_pipeline_and_read_after_the_call(tmp_path: Path) -> None:
    status, _, outputs, seen = _agree(sfp.block_read_after, tmp_path, runnable_backends("finally.block.output_read_after"))
    assert status == "succeeded" and outputs == {"o0": ("int", 102)} and seen == {"block": _status("block")}
    pytest.importorskip("kfp")
    with pytest.raises(PipelineDefinitionError, match="KFP refuses the outputs of a pipeline") as info:
        il.compile(sfp.block_read_after, backend="kfp", out=tmp_path / "r.yaml")
    e = info.value
    assert (e.pipeline, e.step, e.port) == ("sf-block-read-after", "sf-block-returning", "o0")
    assert "sub-pipeline 'sf-block-returning' (called as 'sf-block-returning')" in str(e) and "step 'after'" in str(e)
    assert "whole-body il.finally_(step)" in (e.hint or "")


def _kfp(pipeline: Any, tmp_path: Path) -> tuple[dict[str, Any], Any]:
    from kfp import components

    [path] = il.compile(pipeline, backend="kfp", out=tmp_path / "kfp")
    ir = next(iter(yaml.safe_load_all(path.read_text())))
    return ir, components.load_component_from_file(str(path)).pipeline_spec


def test_kfp_compiles_an_exit_handler_inside_each_call_s_nested_pipeline(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    ir, pb = _kfp(sfp.twice, tmp_path)
    assert {t["componentRef"]["name"] for t in ir["root"]["dag"]["tasks"].values()} == {"comp-sf-work", "comp-work-b"}
    for call, comp in (("sf-work", "comp-sf-work"), ("work-b", "comp-work-b")):
        tasks = pb.components[comp].dag.tasks  # loaded back through kfp
        [exit_name] = [k for k, t in tasks.items() if t.trigger_policy.strategy == t.trigger_policy.ALL_UPSTREAM_TASKS_COMPLETED]
        exit_task = tasks[exit_name]
        assert exit_task.task_info.name == f"{call}.cleanup"
        [group] = exit_task.dependent_tasks
        body = pb.components[tasks[group].component_ref.name].dag.tasks
        assert {t.task_info.name for t in body.values()} == {f"{call}.prepare", f"{call}.maybe_fail"}
        assert exit_task.inputs.parameters["status"].task_final_status.producer_task == group
        status = ir["components"][exit_task.component_ref.name]["inputDefinitions"]["parameters"]["status"]
        assert status["parameterType"] == "TASK_FINAL_STATUS"
    # A branch inside the call: the dsl.If sits inside the exit handler's group.
    ir, pb = _kfp(sfp.branch, tmp_path / "branch")
    tasks = pb.components["comp-sf-branchy"].dag.tasks
    group = next(t for t in tasks.values() if t.component_ref.name.startswith("comp-exit-handler"))
    inner = pb.components[group.component_ref.name].dag.tasks
    [branches] = [t for t in inner.values() if t.component_ref.name.startswith("comp-condition-branches")]
    conditions = [t.trigger_policy.condition for t in pb.components[branches.component_ref.name].dag.tasks.values()]
    assert len(conditions) == 2 and all(conditions)  # the il.when/il.otherwise as dsl.If/dsl.Else
    # The block form: an ExitHandler in the call's component around the block's tasks only.
    ir, pb = _kfp(sfp.block, tmp_path / "block")
    tasks = pb.components["comp-sf-blocky"].dag.tasks
    exit_task = next(t for t in tasks.values() if t.task_info.name == "sf-blocky.block-cleanup")
    [group] = exit_task.dependent_tasks
    body = pb.components[tasks[group].component_ref.name].dag.tasks
    assert {t.task_info.name for t in body.values()} == {"sf-blocky.maybe_fail", "sf-blocky.shout"}
    assert {t.task_info.name for k, t in tasks.items() if k != group} >= {"sf-blocky.prepare", "sf-blocky.head"}


def test_kfp_a_call_with_a_finally_inside_an_outer_when_and_beside_the_caller_s_finally(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    ir, pb = _kfp(sfp.in_when, tmp_path)  # the call's task under the caller's dsl.If, its handler inside
    tasks = pb.components["comp-sf-work"].dag.tasks
    assert any(t.trigger_policy.strategy == t.trigger_policy.ALL_UPSTREAM_TASKS_COMPLETED for t in tasks.values())
    ir, pb = _kfp(sfp.with_outer, tmp_path / "outer")  # the caller's ExitHandler around the call's task
    root = pb.root.dag.tasks
    run_exit = next(t for t in root.values() if t.task_info.name == "run-cleanup")
    [group] = run_exit.dependent_tasks
    assert [t.component_ref.name for t in pb.components[root[group].component_ref.name].dag.tasks.values()] == [
        "comp-sf-work"]
    assert any(t.trigger_policy.strategy == t.trigger_policy.ALL_UPSTREAM_TASKS_COMPLETED
               for t in pb.components["comp-sf-work"].dag.tasks.values())


def _models(pipeline: Any) -> list[Any]:
    from interlock.adapters.flyte.compile import serialize

    return serialize(il.spec(pipeline), project="p", domain="d", version="v1", image="img:1")


def _flyte(pipeline: Any) -> Any:
    from flytekit.models.admin.workflow import WorkflowSpec

    [wf] = [m for m in _models(pipeline) if isinstance(m, WorkflowSpec) and m.template.id.name == pipeline.name]
    return wf


def test_flyte_compiles_each_call_s_sub_workflow_with_its_failure_node(tmp_path: Path) -> None:
    wf = _flyte(sfp.twice)
    calls = {n.id: n.workflow_node.sub_workflow_ref.name for n in wf.template.nodes if n.workflow_node is not None}
    assert calls == {"sf-work": "sf-twice.sf-work", "work-b": "sf-twice.work-b"}
    subs = {s.id.name: s for s in wf.sub_workflows}
    for call in calls:
        sub = subs[f"sf-twice.{call}"]
        assert sub.failure_node is not None
        assert sub.failure_node.task_node.reference_id.name == f"sf-twice.{call}.cleanup"
        last = next(n for n in sub.nodes if n.id == f"{call}-cleanup")  # the success path's last node
        assert set(last.upstream_node_ids) == {f"{call}-prepare", f"{call}-maybe-fail"}
        # Its inputs: the call's run-time arguments (a constant argument is baked in), which the
        # failure node's task takes too, plus Flyte's error.
        want = {"x", "out"} if call == "sf-work" else {"x", "fail", "out"}
        assert set(sub.interface.inputs) == want
        task = next(m for m in _models(sfp.twice) if getattr(getattr(m, "template", None), "id", None) is not None
                    and m.template.id.name == f"sf-twice.{call}.cleanup")
        assert set(task.template.interface.inputs) == want | {"err"}
    assert wf.template.failure_node is None  # the caller has none
    # Inside the caller's il.when: the call's sub-workflow (with its failure node) inside the branch's.
    wf = _flyte(sfp.in_when)
    sub = next(s for s in wf.sub_workflows if s.id.name == "sf-in-when.sf-work")
    assert sub.failure_node.task_node.reference_id.name == "sf-in-when.sf-work.cleanup"
    # The block form: a block sub-workflow with its failure node inside the call's sub-workflow.
    wf = _flyte(sfp.block)
    subs = {s.id.name: s for s in wf.sub_workflows}
    assert subs["sf-block.sf-blocky"].failure_node is None
    block = subs["sf-block.sf-blocky.block-cleanup-block"]
    assert block.failure_node.task_node.reference_id.name == "sf-block.sf-blocky.block-cleanup"
    assert any(n.workflow_node is not None and n.workflow_node.sub_workflow_ref.name == block.id.name
               for n in subs["sf-block.sf-blocky"].nodes)


def test_finally_misuse_inside_a_sub_pipeline_is_refused_at_build_time() -> None:
    from conformance.finally_pipelines import prepare, report
    from interlock.core.dsl.finally_ import finally_

    @il.pipeline(name="sf-two")
    def two(x: int, out: str):
        finally_(report.named("a"), label="a", out=out)
        finally_(report.named("b"), label="b", out=out)
        prepare(x=x)

    def two_outer(x: int = 1, out: str = "o"):
        two(x=x, out=out)

    with pytest.raises(PipelineDefinitionError, match="at most one il.finally_") as info:
        il.spec(il.pipeline(name="sf-two-outer")(two_outer))
    assert "sub-pipeline 'sf-two'" in str(info.value)

    @il.pipeline(name="sf-gated")
    def gated(x: int, go: bool, out: str):
        y = prepare(x=x)
        with il.when(go):
            finally_(report, label="a", out=out)
        prepare.named("p2")(x=y)

    def gated_outer(x: int = 1, go: bool = True, out: str = "o"):
        gated(x=x, go=go, out=out)

    with pytest.raises(PipelineDefinitionError, match="il.finally_ inside an il.when block"):
        il.spec(il.pipeline(name="sf-gated-outer")(gated_outer))

    @il.step
    def where(x: int) -> str:
        return f"/tmp/{x}"

    @il.pipeline(name="sf-wired")
    def wired(x: int, out: str):
        finally_(report, label="a", out=out)
        prepare(x=x)

    def caller(x: int = 1):
        wired(x=x, out=where(x=x))  # the finally step would read a step output of the caller

    with pytest.raises(PipelineDefinitionError, match="bound to a step output of the calling pipeline") as info:
        il.spec(il.pipeline(name="sf-wired-outer")(caller))
    assert info.value.port == "out" and "sub-pipeline 'sf-wired'" in str(info.value)


def test_a_call_s_finally_survives_the_spec_json() -> None:
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = il.spec(sfp.twice)
    back = PipelineSpec.loads(spec.dumps())
    assert back.finally_blocks == spec.finally_blocks and back.subs == spec.subs
    assert [s.finally_ for s in back.subs] == ["sf-work.cleanup", "work-b.cleanup"]


def test_interlock_backends_lists_the_construct() -> None:
    from interlock.core.backend.protocol import FEATURES, features_used, get_backend

    assert "subpipeline.finally" in FEATURES
    for name in ("local", "flyte", "flyte-local", "kfp", "kfp-local"):
        if name in available_backends():
            assert get_backend(name).capabilities().features["subpipeline.finally"].startswith("native")
    used = features_used(il.spec(sfp.twice))
    assert used["subpipeline.finally"] == ["sf-work.cleanup", "work-b.cleanup"] and "finally.block" not in used


def test_the_guide_example_runs_as_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/control-flow.md, "A finally inside a sub-pipeline": the code block runs and prints what it says."""
    import contextlib
    import io
    import runpy

    path = tmp_path / "guide_subpipeline_finally.py"
    path.write_text(first_block_after("docs/control-flow.md", "### A finally inside a sub-pipeline"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        monkeypatch.chdir(tmp_path)  # the guide runs without a workdir: ./.interlock here, not in the checkout
        runpy.run_path(str(path), run_name="__main__")
    lines = [line for line in out.getvalue().splitlines() if not line.startswith("[")]
    assert lines == ["failed succeeded succeeded"]


def test_a_sub_pipeline_with_a_finally_inside_another(tmp_path: Path) -> None:
    status, steps, _, seen = _agree(sfp.nested, tmp_path, fail=True)
    assert status == "failed" and steps["sf-wrap.sf-work.cleanup"] == steps["sf-wrap.wrap-cleanup"] == "succeeded"
    failed = _status("inner", "failed", ["sf-wrap.sf-work.maybe_fail"], ERROR.format(3))
    assert seen == {"inner": failed, "wrap": failed | {"label": "wrap"}}


def test_a_plain_sub_pipeline_inside_a_finally_block(tmp_path: Path) -> None:
    status, steps, _, seen = _agree(sfp.plain_in_block, tmp_path, fail=True)
    assert status == "failed" and steps["block-cleanup"] == "succeeded"
    assert seen == {"block": _status("block", "failed", ["sf-plain.maybe_fail"], ERROR.format(2))}


def test_a_sub_pipeline_with_a_finally_inside_the_caller_s_finally_block(tmp_path: Path) -> None:
    status, steps, _, seen = _agree(sfp.in_block, tmp_path, fail=True)
    assert status == "failed" and steps["sf-work.cleanup"] == steps["block-cleanup"] == "succeeded"
    failed = _status("inner", "failed", ["sf-work.maybe_fail"], ERROR.format(3))
    assert seen == {"inner": failed, "block": failed | {"label": "block"}}


def test_flyte_puts_a_call_inside_the_finally_block_around_it() -> None:
    # Before: a sub-pipeline call written in a `with il.finally_` block became a workflow node
    # of the caller, outside the block's sub-workflow, and the block's failure node was lost.
    wf = _flyte(sfp.in_block)
    subs = {s.id.name: s for s in wf.sub_workflows}
    assert [n.workflow_node.sub_workflow_ref.name for n in wf.template.nodes if n.workflow_node is not None] == [
        "sf-in-block.block-cleanup-block"]
    block = subs["sf-in-block.block-cleanup-block"]
    assert block.failure_node.task_node.reference_id.name == "sf-in-block.block-cleanup"
    inner = [n.workflow_node.sub_workflow_ref.name for n in block.nodes if n.workflow_node is not None]
    assert inner == ["sf-in-block.sf-work"]
    assert subs["sf-in-block.sf-work"].failure_node.task_node.reference_id.name == "sf-in-block.sf-work.cleanup"
    wf = _flyte(sfp.plain_in_block)  # a call without a finally of its own, likewise
    [block] = [s for s in wf.sub_workflows if s.id.name == "sf-plain-in-block.block-cleanup-block"]
    assert [n.workflow_node.sub_workflow_ref.name for n in block.nodes if n.workflow_node is not None] == [
        "sf-plain-in-block.sf-plain"]
    wf = _flyte(sfp.nested)  # a call's sub-workflow inside another's, each with its failure node
    subs = {s.id.name: s for s in wf.sub_workflows}
    assert subs["sf-nested.sf-wrap"].failure_node.task_node.reference_id.name == "sf-nested.sf-wrap.wrap-cleanup"
    assert subs["sf-nested.sf-wrap.sf-work"].failure_node is not None


def test_flyte_finds_a_call_s_finally_task_again_in_the_container() -> None:
    # pyflyte-execute loads the task from its loader args: the call's finally task, typed by its sub-workflow.
    from interlock.adapters.flyte.resolver import resolver
    from interlock.adapters.flyte.workflow import build_entities

    task = build_entities(il.spec(sfp.twice)).tasks["work-b.cleanup"]
    args = resolver.loader_args(None, task)
    assert args[2:4] == ["node", "work-b.cleanup"]
    again = resolver.load_task(args)
    assert again.name == "sf-twice.work-b.cleanup" and set(again.python_interface.inputs) == {"x", "fail", "out", "err"}
