"""``with il.finally_`` blocks nested in each other (issue 31, Airflow's nested setup/teardown):
the inner teardown runs as the inner block ends and sees the inner block's status, the outer block
goes on (what reads the inner block waits for its teardown), then the outer teardown sees the
outer block's status, the inner block and its teardown included; each teardown reads its own
setup's output where the backend can. The same statuses and RunStatus on every backend that runs
them; each backend's compile renders the nesting natively."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from backends import runnable_backends

import interlock as il
from conformance import nested_finally_pipelines as nfp
from interlock.core.backend.protocol import features_used
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.finally_ import finally_

NESTED = runnable_backends("finally.block.nested")
READS = runnable_backends("finally.block.nested", "finally.block.reads_output")


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[Any, ...]:
    out = tmp_path / f"seen-{backend}"
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, out=str(out), **params)
    seen = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, seen


# What each case gives on every backend: the run's status, the steps that did not succeed, and
# what each teardown saw (its block's status and failed steps).
EXPECTED: dict[str, tuple[str, dict[str, str], dict[str, tuple[str, list[str]]]]] = {
    "": ("succeeded", {}, {"inner": ("succeeded", []), "outer": ("succeeded", [])}),
    "inner": ("failed", {"inner-work": "failed", "outer-work": "not-run"},
              {"inner": ("failed", ["inner-work"]), "outer": ("failed", ["inner-work"])}),
    "outer": ("failed", {"outer-work": "failed"}, {"inner": ("succeeded", []), "outer": ("failed", ["outer-work"])}),
    "bucket": ("failed", {"make-bucket": "failed", "inner-work": "not-run", "outer-work": "not-run"},
               {"inner": ("failed", ["make-bucket"]), "outer": ("failed", ["make-bucket"])}),
    # The inner teardown failed: the outer block goes no further, and its teardown sees why.
    "inner-teardown": ("failed", {"drop-bucket": "failed", "outer-work": "not-run"},
                       {"inner": ("succeeded", []), "outer": ("failed", ["drop-bucket"])}),
}


def _check(got: tuple[Any, ...], fail: str) -> None:
    status, steps, seen = got
    want_status, not_ok, teardowns = EXPECTED[fail]
    assert status == want_status
    assert {k: v for k, v in steps.items() if v != "succeeded"} == not_ok
    assert steps["drop-bucket"] == ("failed" if fail == "inner-teardown" else "succeeded")
    assert steps["drop-cluster"] == "succeeded"
    assert {k: (v["status"], v["failed_steps"]) for k, v in seen.items()} == teardowns


@pytest.mark.parametrize("fail", nfp.FAILS, ids=[f or "none" for f in nfp.FAILS])
def test_nested_blocks_each_teardown_sees_its_block_on_every_backend(tmp_path: Path, fail: str) -> None:
    results = {b: _run(nfp.finally_nested_plain, b, tmp_path, fail=fail) for b in NESTED}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    _check(results["local"], fail)


@pytest.mark.parametrize("fail", ["", "bucket", "inner-teardown"], ids=["none", "bucket", "inner-teardown"])
def test_nested_teardowns_read_their_own_setup(tmp_path: Path, fail: str) -> None:
    results = {b: _run(nfp.finally_nested, b, tmp_path, fail=fail) for b in READS}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    _check(results["local"], fail)
    seen = results["local"][2]
    assert seen["outer"]["resource"] == "cluster-42"
    assert seen["inner"]["resource"] == (None if fail == "bucket" else "bucket-42")


@pytest.mark.parametrize("fail", nfp.FAILS, ids=[f or "none" for f in nfp.FAILS])
def test_nested_blocks_in_a_sub_pipeline_are_scoped_to_the_call(tmp_path: Path, fail: str) -> None:
    # kfp-local is left out: the call returns an output made inside its block, which KFP refuses (below).
    results = {b: _run(nfp.finally_nested_call, b, tmp_path, fail=fail) for b in NESTED if b != "kfp-local"}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    status, steps, seen = results["local"]
    want_status, not_ok, teardowns = EXPECTED[fail]
    assert status == want_status and steps["after"] == ("succeeded" if not fail else "not-run")
    assert {k: v for k, v in steps.items() if v != "succeeded"} == {
        **{f"env.{k}": v for k, v in not_ok.items()}, **({"after": "not-run"} if fail else {})}
    assert {k: (v["status"], [f.removeprefix("env.") for f in v["failed_steps"]]) for k, v in seen.items()} == teardowns


def test_kfp_refuses_an_output_from_inside_a_call_s_block_at_build(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    with pytest.raises(PipelineDefinitionError, match="inside an il.finally_ block") as info:
        il.compile(nfp.finally_nested_call, backend="kfp", out=tmp_path / "c.yaml")
    assert info.value.hint


def test_nesting_is_a_feature_of_its_own() -> None:
    assert features_used(il.spec(nfp.finally_nested_plain))["finally.block.nested"] == ["drop-bucket"]


def test_nested_blocks_in_a_when_block_are_refused_with_where_to_write_them() -> None:
    def in_when(x: int = 1):
        y = nfp.prepare(x=x)
        with finally_(nfp.delete.named("a"), label="a", out="o"):
            with il.when(y > 1):
                with finally_(nfp.drop, label="b", out="o"):
                    nfp.create(name="c")

    with pytest.raises(PipelineDefinitionError, match="inside an il.when block") as info:
        il.spec(il.pipeline(name="nested-in-when")(in_when))
    assert "top level" in (info.value.hint or "")


def test_airflow_ends_each_block_with_its_all_done_task() -> None:
    pytest.importorskip("airflow")
    from interlock.adapters.airflow.describe import describe

    tasks = {t["id"]: t for t in describe(il.spec(nfp.finally_nested_plain), {})["tasks"]}
    inner, outer = tasks["drop-bucket"], tasks["drop-cluster"]
    assert inner["rule"] == outer["rule"] == "all_done"
    assert set(inner["upstream"]) == {"make-bucket", "inner-work"}
    assert "drop-bucket" in outer["upstream"]  # the inner pair ends first
    assert "drop-bucket" in tasks["outer-work"]["upstream"]  # the outer block goes on after it


def test_flyte_nests_the_inner_block_s_sub_workflow_in_the_outer_one() -> None:
    pytest.importorskip("flytekit")
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    models = serialize(il.spec(nfp.finally_nested_plain), project="p", domain="d", version="v1", image="img:1")
    [wf] = [m for m in models if isinstance(m, WorkflowSpec) and m.template.id.name == "conf-finally-nested-plain"]
    subs = {s.id.name.rpartition(".")[2]: s for s in wf.sub_workflows}
    outer, inner = subs["drop-cluster-block"], subs["drop-bucket-block"]
    assert [n.id for n in wf.template.nodes if n.workflow_node is not None] == ["drop-cluster-block"]
    [nested] = [n for n in outer.nodes if n.workflow_node is not None]
    assert nested.id == "drop-bucket-block" and nested.workflow_node.sub_workflow_ref == inner.id
    for sub, step in ((outer, "drop-cluster"), (inner, "drop-bucket")):  # each its failure node and last node
        assert sub.failure_node.task_node.reference_id.name.endswith(f".{step}")
        assert any(n.id == step for n in sub.nodes)
    assert "drop-bucket-block" in next(n for n in outer.nodes if n.id == "outer-work").upstream_node_ids


def test_kfp_runs_the_inner_finally_task_after_its_tasks_inside_the_outer_exit_handler(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    import yaml

    [path] = il.compile(nfp.finally_nested_plain, backend="kfp", out=tmp_path / "n.yaml")
    ir = next(iter(yaml.safe_load_all(Path(path).read_text())))
    root = ir["root"]["dag"]["tasks"]
    outer = root["drop-cluster-finally"]  # the outer block: an ExitHandler, its exit task
    assert outer["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    [group] = outer["dependentTasks"]
    inside = ir["components"][root[group]["componentRef"]["name"]]["dag"]["tasks"]
    inner = inside["drop-bucket-finally"]  # KFP allows no ExitHandler in it: ignore_upstream_failure
    assert inner["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    assert set(inner["dependentTasks"]) == {"make-bucket", "inner-work"}
    assert "drop-bucket-finally" in inside["outer-work"]["dependentTasks"]
    params = ir["components"]["comp-drop-bucket-finally"]["inputDefinitions"]["parameters"]
    assert params["status"]["parameterType"] == "STRUCT"  # no PipelineTaskFinalStatus: from the run state
    assert ir["components"]["comp-drop-cluster-finally"]["inputDefinitions"]["parameters"]["status"][
        "parameterType"] == "TASK_FINAL_STATUS"


def test_argo_nests_the_inner_block_s_dag(tmp_path: Path) -> None:
    pytest.importorskip("hera")
    import yaml

    [path] = il.compile(nfp.finally_nested_plain, backend="argo", out=tmp_path, image="registry.example/team:1")
    templates = {t["name"]: t for t in yaml.safe_load(path.read_text())["spec"]["templates"]}
    [outer] = [t for t in templates["main"]["dag"]["tasks"] if t["name"] == "drop-cluster-block"]
    [inner] = [t for t in templates[outer["template"]]["dag"]["tasks"] if t["name"] == "drop-bucket-block"]
    assert "exit" in outer["hooks"] and "exit" in inner["hooks"]


def test_flyte2_renders_nested_try_finally_in_the_driver() -> None:
    pytest.importorskip("flyte")
    from interlock.adapters.flyte2.render import render

    source = render(il.spec(nfp.finally_nested_plain), store="/tmp/store")
    lines = [line.strip() for line in source.splitlines()]
    outer, inner = lines.index("try:  # with il.finally_(drop-cluster)"), lines.index("try:  # with il.finally_(drop-bucket)")
    close_inner = next(i for i, line in enumerate(lines) if line.startswith("await d.close('drop-bucket'"))
    close_outer = next(i for i, line in enumerate(lines) if line.startswith("await d.close('drop-cluster'"))
    work = lines.index("await d.step('outer-work', step_outer_work)")
    assert outer < inner < close_inner < work < close_outer  # the outer block goes on after the inner finally
    compile(source, "<flyte2>", "exec")  # valid Python
