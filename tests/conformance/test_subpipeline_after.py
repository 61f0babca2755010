"""``after=`` on a sub-pipeline call: ordering without data between calls (KFP ``.after()`` on the
pipeline-as-component task, Flyte ``>>`` on the sub-workflow node), the same steps on every
backend; and a sub-pipeline called without its defaulted parameters runs with its defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from backends import runnable_backends
from doc_blocks import first_block_after

import interlock as il
from conformance import policy_pipelines as pp
from interlock.core.base.errors import PipelineDefinitionError

BACKENDS = runnable_backends()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_a_call_after_a_step_waits_for_it_on_every_backend(tmp_path: Path, backend: str, fail: bool) -> None:
    r = il.run(pp.after_calls, backend=backend, workdir=tmp_path, raise_on_failure=False, progress=False, fail=fail)
    steps = {k: str(s.status) for k, s in r.steps.items()}
    calls = ("first.note", "first.rows", "second.note", "second.rows", "tail")
    if fail:  # failure_policy="continue": what waits for the failed step does not run, the rest does
        assert str(r.status) == "failed" and steps["gate_step"] == "failed" and steps["beside"] == "succeeded"
        assert {steps[n] for n in calls} == {"not-run"}
    else:
        assert str(r.status) == "succeeded" and set(steps.values()) == {"succeeded"}
        assert r.outputs == {"o0": 11}  # `rows` left out of the call: the sub-pipeline's default, 10


def test_kfp_orders_the_call_tasks_with_after(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    [path] = il.compile(pp.after_calls, backend="kfp", out=tmp_path / "a.yaml")
    tasks = next(iter(yaml.safe_load_all(Path(path).read_text())))["root"]["dag"]["tasks"]
    assert tasks["first"]["dependentTasks"] == ["gate-step"]
    assert tasks["second"]["dependentTasks"] == ["first"] and tasks["tail"]["dependentTasks"] == ["second"]
    assert "dependentTasks" not in tasks["beside"]


def test_flyte_orders_the_sub_workflow_nodes_with_after() -> None:
    pytest.importorskip("flytekit")
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    [wf] = [m.to_flyte_idl() for m in serialize(pp.after_calls.spec, project="p", domain="d", version="v1",
                                               image="ghcr.io/acme/img:v1")
            if isinstance(m, WorkflowSpec) and m.template.id.name == "conf-after-calls"]
    upstream = {n.id: list(n.upstream_node_ids) for n in wf.template.nodes}
    assert upstream["first"] == ["gate-step"] and upstream["second"] == ["first"] and upstream["tail"] == ["second"]


def test_after_on_a_call_must_name_work_of_the_pipeline() -> None:
    @il.pipeline(name="after-bad")
    def bad():
        pp.tidy(after=5)

    with pytest.raises(PipelineDefinitionError, match="after=5 is not a step call") as info:
        il.spec(bad)
    assert info.value.step == "conf-tidy"


def test_the_documented_example_runs_the_same_on_every_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "load_all_doc.py").write_text(first_block_after("docs/control-flow.md", "### Ordering calls without data: `after=`"))
    monkeypatch.syspath_prepend(str(tmp_path))  # kfp-local's tasks import it by module name
    import load_all_doc

    for backend in BACKENDS:
        r = il.run(load_all_doc.load_all, backend=backend, workdir=tmp_path / backend, progress=False)
        assert r.outputs == {"o0": 100, "o1": 5}, backend
        assert set(str(s.status) for s in r.steps.values()) == {"succeeded"}, backend
