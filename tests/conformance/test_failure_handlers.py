"""Failure handlers (``il.on_failure``, Flyte's ``on_failure=``): a step that runs only when its
scope failed, for the whole pipeline, a block or each call of a sub-pipeline, skipped otherwise;
and finally steps that take no ``il.RunStatus`` (KFP exit tasks are plain components). The same
statuses and handler inputs on every backend; compiled natively for Flyte (the failure node alone)
and KFP (an exit task)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from backends import runnable_backends
from doc_blocks import first_block_after

import interlock as il
from conformance import handler_pipelines as hp
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.finally_ import on_failure

BACKENDS = runnable_backends()
S, F, NR, SK = "succeeded", "failed", "not-run", "skipped"


def _run(pipeline: Any, backend: str, tmp_path: Path, fail: bool) -> tuple[str, dict[str, str], dict[str, Any]]:
    out = tmp_path / "seen"
    r = il.run(pipeline, backend=backend, workdir=tmp_path / "w", raise_on_failure=False, progress=False,
               fail=fail, out=str(out))
    seen = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, seen


EXPECTED: dict[tuple[str, bool], tuple[Any, dict[str, str], set[str]]] = {
    ("run", False): (hp.handler_run, {"prepare": S, "maybe_fail": S, "on-fail": SK}, set()),
    ("run", True): (hp.handler_run, {"prepare": S, "maybe_fail": F, "on-fail": S}, {"run"}),
    ("block", False): (hp.handler_block, {"maybe_fail": S, "block-handler": SK, "prepare": S, "tidy": S}, {"tidy"}),
    ("block", True): (hp.handler_block, {"maybe_fail": F, "block-handler": S, "prepare": S, "tidy": S},
                      {"block", "tidy"}),
    ("call", False): (hp.handler_call, {"conf-handled-part.maybe_fail": S, "conf-handled-part.part-handler": SK,
                                        "prepare": S}, set()),
    ("call", True): (hp.handler_call, {"conf-handled-part.maybe_fail": F, "conf-handled-part.part-handler": S,
                                       "prepare": NR}, {"part"}),
    ("plain", False): (hp.plain_finally, {"maybe_fail": S, "cleanup": S}, {"cleanup"}),
    ("plain", True): (hp.plain_finally, {"maybe_fail": F, "cleanup": S}, {"cleanup"}),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(EXPECTED), ids=[f"{c}-{'fails' if f else 'succeeds'}" for c, f in EXPECTED])
def test_a_failure_handler_runs_only_when_its_scope_failed_on_every_backend(tmp_path: Path, backend: str,
                                                                             case: tuple[str, bool]) -> None:
    pipeline, steps, ran = EXPECTED[case]
    status, got, seen = _run(pipeline, backend, tmp_path, fail=case[1])
    assert status == ("failed" if case[1] else "succeeded")  # a handler never swallows the failure
    assert got == steps and set(seen) == ran
    for label in {"run", "block", "part"} & ran:  # what the handler saw: its own scope's failure
        assert seen[label]["status"] == "failed" and len(seen[label]["failed_steps"]) == 1


def test_a_failure_handler_returns_nothing() -> None:
    @il.step
    def noisy(status: il.RunStatus) -> str:
        return status.status

    @il.pipeline(name="handler-with-output")
    def bad():
        on_failure(noisy)
        hp.prepare(x=1)

    with pytest.raises(PipelineDefinitionError, match="a failure handler returns nothing") as info:
        il.spec(bad)
    assert info.value.step == "noisy" and "-> None" in (info.value.hint or "")


def test_a_finally_step_takes_at_most_one_status() -> None:
    @il.step
    def twice(a: il.RunStatus, b: il.RunStatus) -> None: ...

    @il.pipeline(name="two-statuses")
    def bad():
        il.finally_(twice)
        hp.prepare(x=1)

    with pytest.raises(PipelineDefinitionError, match="at most one input of type il.RunStatus"):
        il.spec(bad)


def test_flyte_renders_a_handler_as_the_failure_node_alone() -> None:
    pytest.importorskip("flytekit")
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    [wf] = [m.to_flyte_idl() for m in serialize(hp.handler_run.spec, project="p", domain="d", version="v1",
                                               image="ghcr.io/acme/img:v1") if isinstance(m, WorkflowSpec)]
    assert [n.id for n in wf.template.nodes] == ["prepare", "maybe-fail"]  # no success-path node
    assert wf.template.failure_node.task_node.reference_id.name.endswith("on-fail")


def test_kfp_renders_handlers_and_plain_finally_steps_as_exit_tasks(tmp_path: Path) -> None:
    pytest.importorskip("kfp")

    def ir(p: Any) -> dict[str, Any]:
        [path] = il.compile(p, backend="kfp", out=tmp_path / f"{p.name}.yaml")
        return next(iter(yaml.safe_load_all(Path(path).read_text())))

    handler = ir(hp.handler_run)
    assert handler["root"]["dag"]["tasks"]["on-fail-finally"]["triggerPolicy"] == {
        "strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    plain = ir(hp.plain_finally)
    params = plain["components"]["comp-cleanup-finally"]["inputDefinitions"]["parameters"]
    assert params["interlock_final_status"]["parameterType"] == "TASK_FINAL_STATUS"  # KFP's status, for the shim
    assert set(params) == {"interlock_final_status", "label", "out"}


def test_the_documented_example_runs_the_same_on_every_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "train_and_page_doc.py").write_text(first_block_after("docs/control-flow.md", "### Only on a failure: `il.on_failure`"))
    monkeypatch.syspath_prepend(str(tmp_path))  # kfp-local's tasks import it by module name
    import train_and_page_doc as doc_example

    for backend in BACKENDS:
        for epochs, handler in ((3, SK), (0, S)):
            r = il.run(doc_example.train_and_page, backend=backend, workdir=tmp_path / f"{backend}{epochs}",
                       raise_on_failure=False, progress=False, epochs=epochs)
            assert str(r.status) == (S if epochs else F), backend
            assert str(r.steps["page_oncall"].status) == handler and str(r.steps["create_cluster"].status) == S
