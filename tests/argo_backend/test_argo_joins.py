"""Join rules on Argo (adapters/argo/joins.py): the depends expressions as written, and the
receipt the manifest gives when run (manifest_runner) against local's run, for the inputs the
differential test's defaults do not reach (a closed branch, an upstream omitted behind a failure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conformance import join_pipelines as jp
from manifest_runner import ManifestRunner

import interlock as il
from interlock.core.dsl.pipeline import Pipeline


@il.pipeline(name="argo-join-behind-failure", failure_policy="continue")
def behind_failure(x: int = 1):
    """A join after a step omitted behind a failure: that upstream is down, not skipped."""
    b = jp.boom(x=x)
    c = jp.plus(v=b)  # omitted by Argo: boom failed
    jp.mark.named("after-none-failed")(after=[c], run_if="none_failed")
    jp.mark.named("after-any")(after=[c, jp.left(x=x)], run_if="any_succeeded")
    jp.mark.named("after-one")(after=[c], run_if="one_succeeded")
    jp.mark.named("after-all-done")(after=[c], run_if="all_done")


def _tasks(pipeline: Pipeline, tmp_path: Path) -> dict[str, dict[str, Any]]:
    [path] = il.compile(pipeline, backend="argo", out=tmp_path, image="registry.example/team:1")
    doc = yaml.safe_load(path.read_text())
    return {t["name"]: t for tpl in doc["spec"]["templates"] for t in tpl.get("dag", {}).get("tasks", [])}


def test_a_join_after_a_branch_depends_on_one_success_and_no_failure(tmp_path: Path) -> None:
    task = _tasks(jp.join_branch, tmp_path)["joined"]
    assert task["depends"] == ("((left.Succeeded || right.Succeeded) && !(left.Failed || left.Errored) "
                               "&& !(right.Failed || right.Errored))")
    # Argo cannot resolve an output of a task that did not run: a default the entry reads as None.
    assert {p["name"]: p["value"] for p in task["arguments"]["parameters"]}["a"] == (
        "{{=tasks['left'].outputs?.parameters?.o0 ?? 'interlock:no-output'}}")


def test_under_continue_an_upstream_omitted_behind_a_failure_is_down(tmp_path: Path) -> None:
    task = _tasks(behind_failure, tmp_path)["after-any"]
    assert task["depends"] == ("((left.Succeeded || plus.Succeeded) && !(left.Failed || left.Errored) "
                               "&& !(plus.Failed || plus.Errored || (plus.Omitted && (boom.Failed || boom.Errored))))")


@il.step
def echo(text: str) -> str:
    return text


@il.pipeline(name="argo-after-join")
def after_join(x: int = 1):
    """Default-rule steps after a join its rule skipped: one runs after= it, one reads it."""
    with il.when(jp.positive(x=x)):
        a = jp.left(x=x)
    j = jp.mark.named("join")(after=[a], run_if="all_succeeded")
    jp.mark.named("after-join")(after=[j])
    echo.named("reads-join")(text=j)


def test_the_default_rule_after_a_join_tells_omitted_from_down(tmp_path: Path) -> None:
    tasks = _tasks(after_join, tmp_path)
    assert tasks["join"]["depends"] == "(left.Succeeded)"
    assert tasks["after-join"]["depends"] == "(!(join.Failed || join.Errored))"
    assert tasks["reads-join"]["depends"] == "(join.Succeeded)"


CASES = [
    (jp.join_branch, {"x": "-1"}),
    (jp.join_rules, {"x": "-1"}),
    (jp.join_output, {"x": "-1"}),
    (jp.join_failed, {"x": "-1"}),
    (behind_failure, {}),
    (after_join, {"x": "-1"}),
    (after_join, {"x": "1"}),
]


@pytest.mark.parametrize("pipeline, params", CASES, ids=[f"{il.spec(p).name}{sorted(a.items())}" for p, a in CASES])
def test_argo_records_what_local_does(tmp_path: Path, pipeline: Pipeline, params: dict[str, str]) -> None:
    [path] = il.compile(pipeline, backend="argo", out=tmp_path / "build", image="registry.example/team:1",
                        state_pvc="runs")
    local = il.run(pipeline, backend="local", workdir=tmp_path / "local", raise_on_failure=False,
                   **{k: int(v) for k, v in params.items()})
    runner = ManifestRunner(yaml.safe_load(path.read_text()), tmp_path / "wf", params=params, fork=True)
    runner.run()
    [receipt_path] = (tmp_path / "wf" / "volume").rglob("receipt.json")
    receipt = json.loads(receipt_path.read_text())
    assert receipt["status"] == str(local.status)
    assert {s["node"]: s["status"] for s in receipt["steps"]} == {n: str(s.status) for n, s in local.steps.items()}
    if pipeline is jp.join_branch:  # the join read None for the branch not taken, as on local
        [joined] = [r for k, r in runner.ran.items() if k.endswith("/joined")]
        assert joined.parameters["o0"] == local.outputs["o0"] == "None/-2"


TEARDOWNS = [(jp.teardown_block, "block", {"fail_setup": False}), (jp.teardown_block, "block", {"fail_setup": True}),
             (jp.teardown_block, "block", {"fail_job": True}), (jp.teardown_run, "run", {"fail_setup": False}),
             (jp.teardown_run, "run", {"fail_setup": True})]


@pytest.mark.parametrize("pipeline, label, params", TEARDOWNS,
                         ids=[f"{il.spec(p).name}{sorted(a.items())}" for p, _, a in TEARDOWNS])
def test_a_teardown_reads_what_its_setup_made(tmp_path: Path, pipeline: Pipeline, label: str,
                                              params: dict[str, bool]) -> None:
    [path] = il.compile(pipeline, backend="argo", out=tmp_path / "build", image="registry.example/team:1",
                        state_pvc="runs")
    local = il.run(pipeline, backend="local", workdir=tmp_path / "local", raise_on_failure=False,
                   out=str(tmp_path / "local-out"), **params)
    texts = {"out": str(tmp_path / "argo-out"), **{k: json.dumps(v) for k, v in params.items()}}
    ManifestRunner(yaml.safe_load(path.read_text()), tmp_path / "wf", params=texts, fork=True).run()
    [receipt_path] = (tmp_path / "wf" / "volume").rglob("receipt.json")
    receipt = json.loads(receipt_path.read_text())
    assert {s["node"]: s["status"] for s in receipt["steps"]} == {n: str(s.status) for n, s in local.steps.items()}
    want = None if params.get("fail_setup") else f"cluster-{'a' if label == 'block' else 'b'}"
    for where in ("local-out", "argo-out"):
        assert json.loads((tmp_path / where / f"{label}.json").read_text()) == {"cluster_id": want}, where


def test_a_teardown_reading_its_setup_needs_a_shared_run_state(tmp_path: Path) -> None:
    from interlock.core.base.errors import PipelineDefinitionError

    with pytest.raises(PipelineDefinitionError, match="run state") as info:
        il.compile(jp.teardown_block, backend="argo", out=tmp_path, image="registry.example/team:1")
    assert "state_pvc" in (info.value.hint or "")


@il.pipeline(name="argo-join-across")
def join_across(x: int = 1):
    """A join outside the finally block that runs what it joins: another DAG."""
    from interlock.core.dsl.finally_ import finally_

    with finally_(jp.teardown, label="x", out="/dev/null"):
        a = jp.left(x=x)
    return jp.joined(a=a, run_if="any_succeeded")


def test_a_join_across_nested_dags_is_refused_with_where_to_call_it(tmp_path: Path) -> None:
    from interlock.core.base.errors import PipelineDefinitionError

    with pytest.raises(PipelineDefinitionError, match="another DAG") as info:
        il.compile(join_across, backend="argo", out=tmp_path, image="registry.example/team:1")
    assert info.value.step == "joined" and "same block" in (info.value.hint or "")
