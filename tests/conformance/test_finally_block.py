"""il.finally_ around one block (``with il.finally_(step): ...``, KFP's dsl.ExitHandler around a
group of tasks): the finally step runs after the block whatever its outcome and sees the block's
il.RunStatus; the same statuses, outputs and RunStatus on local, flyte-local and kfp-local; KFP
compiles an ExitHandler around the block's tasks, Flyte a sub-workflow with a failure node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from backends import runnable_backends

import interlock as il
from conformance import finally_block_pipelines as fbp
from conformance import finally_pipelines as fp
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.finally_ import finally_

BACKENDS = runnable_backends()


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[Any, ...]:
    out = tmp_path / f"seen-{backend}"
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, out=str(out), **params)
    seen = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, dict(r.outputs), seen


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_the_block_finally_step_sees_the_block_status_on_every_backend(tmp_path: Path, fail: bool) -> None:
    results = {b: _run(fbp.finally_block, b, tmp_path, fail=fail) for b in BACKENDS}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    status, steps, outputs, seen = results["local"]
    assert steps["block-cleanup"] == "succeeded" and steps["before"] == "succeeded"
    if fail:
        assert status == "failed"  # as with dsl.ExitHandler, the finally step does not swallow the failure
        assert steps["maybe_fail"] == "failed" and steps["shout"] == "not-run"
        assert seen["block"] == {"label": "block", "status": "failed", "failed_steps": ["maybe_fail"],
                                 "error": "FATAL: unclassified ValueError: bad input 2", "type": "RunStatus"}
    else:
        assert status == "succeeded" and outputs == {"o0": 104, "o1": 102}
        assert seen["block"]["status"] == "succeeded" and seen["block"]["failed_steps"] == []


# Every backend that runs a block runs one inside the pipeline's il.finally_ (KFP: the block's
# finally task after its tasks with .ignore_upstream_failure() inside the exit handler).
@pytest.mark.parametrize("backend", runnable_backends("finally.block"))
def test_a_block_finally_and_a_pipeline_finally_each_see_their_scope(tmp_path: Path, backend: str) -> None:
    status, steps, _, seen = _run(fbp.finally_both, backend, tmp_path, fail=True)
    assert status == "failed" and steps["block-cleanup"] == steps["run-cleanup"] == "succeeded"
    assert seen["block"]["failed_steps"] == seen["run"]["failed_steps"] == ["maybe_fail"]


def test_an_output_of_the_block_read_after_it(tmp_path: Path) -> None:
    for backend in runnable_backends("finally.block.output_read_after"):
        status, steps, outputs, _ = _run(fbp.finally_block_read, backend, tmp_path / backend)
        assert status == "succeeded" and outputs == {"o0": 102}, backend
    pytest.importorskip("kfp")
    with pytest.raises(PipelineDefinitionError, match="from inside an il.finally_ block") as info:
        il.compile(fbp.finally_block_read, backend="kfp", out=tmp_path / "r.yaml")
    assert info.value.step == "after" and "move this step into" in (info.value.hint or "")


def test_kfp_renders_a_block_inside_the_whole_pipeline_finally_without_an_exit_handler(tmp_path: Path) -> None:
    # KFP allows exit handlers at the outermost scope only (issue 31): inside the whole pipeline's (or
    # state_pvc's receipt handler) a block's finally task runs after its tasks with ignore_upstream_failure.
    pytest.importorskip("kfp")
    for pipeline, kw in ((fbp.finally_both, {}), (fbp.finally_block, {"state_pvc": "interlock-state"})):
        [path] = il.compile(pipeline, backend="kfp", out=tmp_path / f"{il.spec(pipeline).name}.yaml", **kw)
        ir = next(iter(yaml.safe_load_all(Path(path).read_text())))
        root = ir["root"]["dag"]["tasks"]
        [handler] = [t for t in root.values() if "triggerPolicy" in t]  # the outermost exit task
        [group] = handler["dependentTasks"]
        inside = ir["components"][root[group]["componentRef"]["name"]]["dag"]["tasks"]
        block = inside["block-cleanup-finally"]
        assert block["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
        assert "maybe-fail" in block["dependentTasks"]


def test_kfp_compiles_an_exit_handler_around_the_block(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    [path] = il.compile(fbp.finally_block, backend="kfp", out=tmp_path / "f.yaml")
    ir = next(iter(yaml.safe_load_all(Path(path).read_text())))
    root = ir["root"]["dag"]["tasks"]
    exit_task = root["block-cleanup-finally"]
    assert exit_task["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    [group] = exit_task["dependentTasks"]
    assert set(ir["components"][root[group]["componentRef"]["name"]]["dag"]["tasks"]) == {"maybe-fail", "shout"}
    assert {"prepare", "before"} <= set(root)  # outside the handler
    params = ir["components"]["comp-block-cleanup-finally"]["inputDefinitions"]["parameters"]
    assert params["status"]["parameterType"] == "TASK_FINAL_STATUS"


def test_flyte_compiles_a_sub_workflow_with_a_failure_node(tmp_path: Path) -> None:
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    models = serialize(il.spec(fbp.finally_block), project="p", domain="d", version="v1", image="img:1")
    [wf] = [m for m in models if isinstance(m, WorkflowSpec) and m.template.id.name == "conf-finally-block"]
    [block] = [n for n in wf.template.nodes if n.workflow_node is not None]
    assert block.id == "block-cleanup-block"
    [sub] = [s for s in wf.sub_workflows if s.id == block.workflow_node.sub_workflow_ref]
    assert sub.failure_node is not None and sub.failure_node.task_node.reference_id.name == "conf-finally-block.block-cleanup"
    last = next(n for n in sub.nodes if n.id == "block-cleanup")
    assert set(last.upstream_node_ids) == {"maybe-fail", "shout"}
    assert wf.template.failure_node is None  # the whole pipeline has none


def test_finally_block_misuse_is_refused_at_build_time() -> None:
    def nested(x: int = 1):
        with finally_(fp.report.named("a"), label="a", out="o"), finally_(fp.report.named("b"), label="b", out="o"):
            fp.prepare(x=x)

    # Blocks nest (issue 31): the inner block closes first, over some of the outer's members.
    inner, outer = il.spec(il.pipeline(name="fb-nested")(nested)).finally_blocks
    assert (inner.node.name, outer.node.name) == ("b", "a") and inner.members == outer.members == ("prepare",)

    def empty(x: int = 1):
        with finally_(fp.report.named("a"), label="a", out="o"):
            pass
        return fp.prepare(x=x)

    with pytest.raises(PipelineDefinitionError, match="records no step"):
        il.spec(il.pipeline(name="fb-empty")(empty))

    def two_plain(x: int = 1):
        finally_(fp.report.named("a"), label="a", out="o")
        finally_(fp.report.named("b"), label="b", out="o")
        return fp.prepare(x=x)

    with pytest.raises(PipelineDefinitionError, match="at most one"):
        il.spec(il.pipeline(name="fb-two")(two_plain))


def test_finally_blocks_survive_the_spec_json() -> None:
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = il.spec(fbp.finally_both)
    back = PipelineSpec.loads(spec.dumps())
    assert back.finally_blocks == spec.finally_blocks and back.finally_ == spec.finally_
    assert back.finally_blocks[0].members == ("maybe_fail",)
