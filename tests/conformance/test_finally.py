"""il.finally_: a step that runs after the pipeline whatever its outcome and receives the body's
il.RunStatus. Same statuses and the same RunStatus on local and kfp-local for a succeeding and
a failing pipeline; KFP compiles it to dsl.ExitHandler with the step as the exit task (and
keeps the receipt when state_pvc is set); Flyte to the workflow's failure node plus a last node
downstream of every other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from backends import backend_params, runnable_backends

import interlock as il
from conformance import finally_pipelines as fp
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.finally_ import finally_
from interlock.core.model.finally_blocks import RunStatus

BACKENDS = runnable_backends()


def _run(backend: str, tmp_path: Path, fail: bool) -> tuple[str, dict[str, str], dict[str, Any], dict[str, Any]]:
    out = tmp_path / f"seen-{backend}"
    r = il.run(fp.with_finally, backend=backend, workdir=tmp_path / backend, raise_on_failure=False,
               fail=fail, out=str(out))
    seen = json.loads((out / "cleanup.json").read_text())
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, dict(r.outputs), seen


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_the_finally_step_sees_the_same_status_on_every_backend(tmp_path: Path, fail: bool) -> None:
    results = {b: _run(b, tmp_path, fail) for b in BACKENDS}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    status, steps, outputs, seen = results["local"]
    assert steps["report"] == "succeeded"
    for backend in BACKENDS:  # the finally step is in the receipt like any step
        run_dir = next((tmp_path / backend / "runs").iterdir())
        receipt = json.loads((run_dir / "state" / "receipt.json").read_text())
        assert {s["node"]: s["status"] for s in receipt["steps"]}["report"] == "succeeded", backend
    if fail:
        assert status == "failed" and steps["maybe_fail"] == "failed"
        assert seen == {"label": "cleanup", "status": "failed", "failed_steps": ["maybe_fail"],
                        "error": "FATAL: unclassified ValueError: bad input 2", "type": "RunStatus"}
    else:
        assert status == "succeeded" and outputs == {"o0": 4}
        assert seen == {"label": "cleanup", "status": "succeeded", "failed_steps": [], "error": "",
                        "type": "RunStatus"}


@il.step
def broken_cleanup(status: RunStatus) -> None:
    raise RuntimeError("cleanup failed")


@il.step
def one(x: int) -> int:
    return x


@il.pipeline(name="conf-finally-fails")
def finally_fails(x: int = 1):
    finally_(broken_cleanup)
    return one(x=x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_finally_step_fails_the_run(tmp_path: Path, backend: str) -> None:
    r = il.run(finally_fails, backend=backend, workdir=tmp_path, raise_on_failure=False)
    assert str(r.status) == "failed"
    assert {k: str(s.status) for k, s in r.steps.items()} == {"one": "succeeded", "broken_cleanup": "failed"}
    # Once: on Flyte the success path's last node failed, and the failure node must not rerun it.
    assert r.steps["broken_cleanup"].attempts == 1
    assert getattr(r.error, "step", None) == "broken_cleanup" and "cleanup failed" in str(r.error)


def _ir(path: Path) -> dict[str, Any]:
    return next(iter(yaml.safe_load_all(path.read_text())))


@pytest.mark.parametrize("state_pvc", [None, "interlock-state"])
def test_kfp_compiles_an_exit_handler_with_the_finally_step_as_exit_task(tmp_path: Path, state_pvc: str | None) -> None:
    from interlock.adapters.kfp.compile import compile_pipeline
    from interlock.adapters.kfp.policies import KfpOptions

    ir = _ir(compile_pipeline(il.spec(fp.with_finally), tmp_path / "f.yaml", KfpOptions(state_pvc=state_pvc)))
    tasks = ir["root"]["dag"]["tasks"]
    exit_task = tasks["report-finally"]
    assert exit_task["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    assert exit_task["dependentTasks"] == ["exit-handler-1"]
    inputs = ir["components"]["comp-report-finally"]["inputDefinitions"]["parameters"]
    assert inputs["status"]["parameterType"] == "TASK_FINAL_STATUS"
    assert set(ir["components"]["comp-exit-handler-1"]["dag"]["tasks"]) == {"prepare", "maybe-fail"}
    # One exit handler only (KFP allows one, outermost): the receipt is written by the finally task.
    assert not any("receipt" in name for name in ir["components"])
    if state_pvc:
        assert {"interlock_param_x", "interlock_param_fail", "interlock_param_out"} <= set(inputs)


def _flyte_models(tmp_path: Path, pipeline: Any) -> tuple[Any, list[Any]]:
    from flytekit.models.admin.workflow import WorkflowSpec
    from flytekit.models.task import TaskSpec

    from interlock.adapters.flyte.compile import serialize

    models = serialize(il.spec(pipeline), project="p", domain="d", version="v1", image="img:1")
    wf = next(m for m in models if isinstance(m, WorkflowSpec) and m.template.id.name == il.spec(pipeline).name)
    return wf.template, [m for m in models if isinstance(m, TaskSpec)]


def test_flyte_compiles_a_failure_node_and_a_last_node(tmp_path: Path) -> None:
    template, tasks = _flyte_models(tmp_path, fp.with_finally)
    # The failure node: the finally task, bound to every workflow input plus Flyte's error.
    failure = template.failure_node
    assert failure is not None and failure.task_node.reference_id.name == "conf-finally.report"
    task = next(t for t in tasks if t.template.id.name == "conf-finally.report")
    assert set(task.template.interface.inputs) == {"x", "fail", "out", "err"}
    assert task.template.interface.inputs["err"].type.union_type is not None  # Optional[FlyteError]
    assert not task.template.metadata.discoverable  # never cached: it runs on every run
    assert {"x", "fail", "out"} <= {b.var for b in failure.inputs}
    # The success path: the same task as the last node, downstream of every other node.
    last = next(n for n in template.nodes if n.id == "report")
    assert last.task_node.reference_id.name == "conf-finally.report"
    assert set(last.upstream_node_ids) == {n.id for n in template.nodes if n.id not in ("report", "start-node", "end-node")}
    assert {"prepare", "maybe-fail"} <= set(last.upstream_node_ids)
    # In the container the resolver rebuilds the finally task from its loader args.
    from interlock.adapters.flyte.resolver import resolver
    from interlock.adapters.flyte.workflow import build_entities

    built = build_entities(il.spec(fp.with_finally)).finally_task
    again = resolver.load_task(resolver.loader_args(None, built))
    assert again.name == built.name and set(again.python_interface.inputs) == {"x", "fail", "out", "err"}
    # The registered files hold it too (interlock compile --backend flyte).
    files = il.compile(fp.with_finally, backend="flyte", out=tmp_path, image="img:1")
    assert any(str(f).endswith(".pb") for f in files)


def test_local_backends_list_how_they_render_finally() -> None:
    from interlock.core.backend.protocol import get_backend

    assert get_backend("local").capabilities().features["finally"].startswith("native")
    assert "dsl.ExitHandler" in get_backend("kfp").capabilities().features["finally"]
    assert "failure node" in get_backend("flyte").capabilities().features["finally"]
    assert get_backend("flyte-local").capabilities().features["finally"].startswith("native")


@il.step
def flag(x: int) -> bool:
    return x > 0


@il.step
def text(x: int) -> str:
    return str(x)


def _define(body: Any) -> Any:
    return il.spec(il.pipeline(name="conf-finally-bad")(body))


def test_finally_misuse_is_refused_at_build_time() -> None:
    def inside_when(x: int = 1):
        with il.when(flag(x=x)):
            finally_(broken_cleanup)

    with pytest.raises(PipelineDefinitionError, match="inside an il.when block"):
        _define(inside_when)

    def twice(x: int = 1):
        finally_(broken_cleanup)
        finally_(broken_cleanup.named("again"))

    with pytest.raises(PipelineDefinitionError, match="at most one"):
        _define(twice)

    def reads_an_output(x: int = 1):
        finally_(fp.report, label=text(x=x), out="x")

    with pytest.raises(PipelineDefinitionError, match="parameters and constants only"):
        _define(reads_an_output)

    def no_status(x: int = 1):  # accepted: a plain cleanup, as a KFP exit task (test_failure_handlers.py)
        finally_(one, x=x)

    assert _define(no_status).finally_.name == "one"

    def passes_status(x: int = 1):
        finally_(broken_cleanup, status=RunStatus())

    with pytest.raises(PipelineDefinitionError, match="filled by the backend"):
        _define(passes_status)


def test_the_finally_step_survives_the_spec_json() -> None:
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = il.spec(fp.with_finally)
    back = PipelineSpec.loads(spec.dumps())
    assert back.finally_ == spec.finally_ and back.finally_ is not None
    assert back.node("report") == spec.finally_ and "report" not in [n.name for n in back.nodes]


@pytest.mark.parametrize("backend", backend_params())
def test_the_finally_step_sees_a_failed_map_item_the_same_on_every_backend(tmp_path: Path, backend: str) -> None:
    # flyte-local and kfp-local gave failed_steps=[] and a generic message: the items' fragments
    # were folded into the map node only after the run, after the finally step ran.
    out = tmp_path / "seen"
    r = il.run(fp.map_with_finally, backend=backend, workdir=tmp_path / "w", raise_on_failure=False, out=str(out))
    assert str(r.status) == "failed"
    assert {k: str(s.status) for k, s in r.steps.items()} == {
        "fragile_item": "failed", "summed": "not-run", "report": "succeeded"}
    seen = json.loads((out / "cleanup.json").read_text())
    assert seen["status"] == "failed" and seen["failed_steps"] == ["fragile_item"]
    assert seen["error"] == "FATAL: unclassified ValueError: bad input 2"
    assert r.maps["fragile_item"].items == 4 and r.maps["fragile_item"].failed == [1]
