"""Join rules (``run_if=``), steps that skip themselves (``il.Skip``) and a teardown that reads its
setup's output: the same statuses and outputs on every backend that runs them, refused at build
time (with what to write instead) on the backends that cannot express them, and the build-time
checks every backend shares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from backends import runnable_backends

import interlock as il
from conformance import join_pipelines as jp
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError, PolicyError
from interlock.core.dsl.finally_ import finally_
from interlock.core.model.pipeline_spec import PipelineSpec

JOINS = runnable_backends("join.run_if")
SKIPS = runnable_backends("skip")
TEARDOWNS = runnable_backends("finally.block.reads_output")


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[Any, ...]:
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, **params)
    maps = {k: v.to_json() for k, v in (r.maps or {}).items()}
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, dict(r.outputs), maps


def _same_everywhere(backends: list[str], pipeline: Any, tmp_path: Path, **params: Any) -> tuple[Any, ...]:
    results = {b: _run(pipeline, b, tmp_path, **params) for b in backends}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    return results["local"]


@pytest.mark.parametrize("x", [1, -1], ids=["if-taken", "else-taken"])
def test_a_join_after_an_if_else_runs_with_the_branch_that_ran(tmp_path: Path, x: int) -> None:
    status, steps, outputs, _ = _same_everywhere(JOINS, jp.join_branch, tmp_path, x=x)
    assert status == "succeeded" and steps["joined"] == "succeeded"
    assert outputs == {"o0": "2/None" if x > 0 else "None/-2"}
    assert steps["left" if x > 0 else "right"] == "succeeded" and steps["right" if x > 0 else "left"] == "skipped"


@pytest.mark.parametrize("x", [1, -1], ids=["block-taken", "block-not-taken"])
def test_each_join_rule_after_a_block(tmp_path: Path, x: int) -> None:
    status, steps, _, _ = _same_everywhere(JOINS, jp.join_rules, tmp_path, x=x)
    assert status == "succeeded"
    joins = {r: steps[f"after-{r.replace('_', '-')}"] for r in jp.RULES}
    if x > 0:
        assert set(joins.values()) == {"succeeded"}
    else:  # every upstream skipped: only the rules that accept that run
        assert joins == {"none_failed": "succeeded", "all_succeeded": "skipped", "any_succeeded": "skipped",
                         "one_succeeded": "skipped", "all_done": "succeeded"}


@pytest.mark.parametrize("x", [1, -1], ids=["met", "not-met"])
def test_a_pipeline_output_from_a_join_whose_rule_was_not_met_is_none(tmp_path: Path, x: int) -> None:
    status, steps, outputs, _ = _same_everywhere(JOINS, jp.join_output, tmp_path, x=x)
    assert status == "succeeded" and steps["joined"] == ("succeeded" if x > 0 else "skipped")
    assert outputs == {"o0": "2/None" if x > 0 else None}


def test_each_join_rule_after_a_failed_upstream(tmp_path: Path) -> None:
    status, steps, _, _ = _same_everywhere(JOINS, jp.join_failed, tmp_path)
    assert status == "failed" and steps["boom"] == "failed"
    joins = {r: steps[f"after-{r.replace('_', '-')}"] for r in jp.RULES}
    assert joins == {"none_failed": "not-run", "all_succeeded": "not-run", "any_succeeded": "not-run",
                     "one_succeeded": "succeeded", "all_done": "succeeded"}
    assert steps["all-done-reads"] == "succeeded"


def test_under_failure_policy_stop_a_failure_starts_no_join(tmp_path: Path) -> None:
    status, steps, _, _ = _same_everywhere(JOINS, jp.join_failed_stop, tmp_path)
    assert status == "failed" and steps["after-all-done"] == "not-run"


@pytest.mark.parametrize("x", [1, 9], ids=["runs", "skips-itself"])
def test_a_step_that_skips_itself_and_what_depends_on_it(tmp_path: Path, x: int) -> None:
    status, steps, outputs, _ = _same_everywhere(SKIPS, jp.self_skip, tmp_path, x=x)
    assert status == "succeeded"  # a skip is no failure
    if x == 1:
        assert set(steps.values()) == {"succeeded"} and outputs == {"o0": "1/None"}
        return
    assert steps["small"] == "skipped"
    assert steps["plus"] == steps["reads-reader"] == "skipped"  # the default rule: skipped with what it reads
    assert steps["all-succeeded"] == "skipped"
    assert steps["only-after"] == "succeeded"  # none_failed, after= only: as after a closed block
    assert steps["done"] == "succeeded" and outputs == {"o0": "None/None"}  # all_done: it reads None


def test_the_skip_reason_is_in_the_receipt_and_the_step_is_not_retried(tmp_path: Path) -> None:
    r = il.run(jp.self_skip, backend="local", workdir=tmp_path, x=9)
    steps = {s["node"]: s for s in json.loads(Path(r.receipt_path or "").read_text())["steps"]}
    assert steps["small"]["status"] == "skipped" and steps["small"]["facts"]["skipped"] == "9 is too big"
    assert [a["status"] for a in steps["small"]["attempts"]] == ["skipped"]


def test_items_of_a_map_that_skip_themselves_are_none(tmp_path: Path) -> None:
    status, steps, outputs, maps = _same_everywhere(SKIPS, jp.skip_map, tmp_path)
    assert status == "succeeded" and steps["small"] == "succeeded"
    assert outputs == {"o0": [1, None, 3], "o1": 4}
    assert maps["small"]["skipped"] == [1] and maps["small"]["failed"] == []


@pytest.mark.parametrize("fail", ["none", "setup", "job"])
def test_a_teardown_reads_the_id_its_setup_created(tmp_path: Path, fail: str) -> None:
    seen = {}
    for backend in TEARDOWNS:
        out = tmp_path / f"seen-{backend}"
        got = _run(jp.teardown_block, backend, tmp_path, fail_setup=fail == "setup", fail_job=fail == "job",
                   out=str(out))
        assert got == _run(jp.teardown_block, "local", tmp_path / "ref", fail_setup=fail == "setup",
                           fail_job=fail == "job", out=str(tmp_path / "ref-out")), backend
        seen[backend] = json.loads((out / "block.json").read_text())
        status, steps, _, _ = got
        assert steps["teardown"] == "succeeded" and status == ("succeeded" if fail == "none" else "failed")
    expected = {"cluster_id": None if fail == "setup" else "cluster-a"}  # None: the setup failed first
    assert all(s == expected for s in seen.values()), seen


@pytest.mark.parametrize("fail_setup", [False, True], ids=["setup-ok", "setup-failed"])
def test_the_pipeline_finally_reads_the_setup_output(tmp_path: Path, fail_setup: bool) -> None:
    for backend in TEARDOWNS:
        out = tmp_path / f"seen-{backend}"
        status, steps, _, _ = _run(jp.teardown_run, backend, tmp_path, fail_setup=fail_setup, out=str(out))
        assert status == ("failed" if fail_setup else "succeeded") and steps["teardown"] == "succeeded", backend
        assert json.loads((out / "run.json").read_text()) == {"cluster_id": None if fail_setup else "cluster-b"}


# -- what the spec holds ---------------------------------------------------------------------------
def test_join_rules_and_skips_survive_the_spec_round_trip() -> None:
    for p in (jp.join_rules, jp.self_skip, jp.skip_map, jp.teardown_block, jp.teardown_run):
        spec = il.spec(p)
        assert PipelineSpec.loads(spec.dumps()) == spec, p.name
    spec = il.spec(jp.join_rules)
    assert {n.name: n.run_if for n in spec.nodes if n.name.startswith("after-")} == {
        "after-none-failed": None, "after-all-succeeded": "all_succeeded", "after-any-succeeded": "any_succeeded",
        "after-one-succeeded": "one_succeeded", "after-all-done": "all_done"}
    assert il.spec(jp.self_skip).step("small").may_skip


def test_the_decorator_gives_a_rule_to_every_call() -> None:
    @il.step(run_if="any_succeeded")
    def gather(a: int | None = None) -> int:
        return a or 0

    @il.pipeline(name="conf-join-decorated")
    def p(x: int = 1):
        with il.when(jp.positive(x=x)):
            a = jp.left(x=x)
        gather(a=a)
        gather.named("all")(a=a, run_if="all_done")

    spec = il.spec(p)
    assert spec.node("gather").run_if == "any_succeeded" and spec.node("all").run_if == "all_done"


# -- build-time checks -----------------------------------------------------------------------------
def test_an_unknown_rule_is_refused_with_the_closest_name() -> None:
    def gather() -> None: ...

    with pytest.raises(PolicyError, match="not a join rule") as info:
        il.step(run_if="any_success")(gather)
    assert info.value.step == "gather" and "any_succeeded" in (info.value.hint or "")

    @il.pipeline(name="conf-join-bad-rule")
    def p(x: int = 1):
        jp.mark(after=[jp.left(x=x)], run_if="al_done")

    with pytest.raises(PolicyError, match="not a join rule") as info:
        il.spec(p)
    assert info.value.step == "mark" and "all_done" in (info.value.hint or "")


def test_a_non_optional_input_that_may_read_nothing_is_refused() -> None:
    @il.pipeline(name="conf-join-not-optional")
    def p(x: int = 9):
        jp.plus(v=jp.small(x=x), run_if="all_done")

    with pytest.raises(PipelineDefinitionError, match="reads None") as info:
        il.spec(p)
    assert info.value.step == "plus" and info.value.port == "v" and "Optional" in (info.value.hint or "")


def test_reading_from_a_block_under_the_default_rule_is_refused_with_the_join_hint() -> None:
    @il.pipeline(name="conf-join-default-reads-block")
    def p(x: int = 1):
        with il.when(jp.positive(x=x)):
            a = jp.left(x=x)
        jp.joined(a=a)

    with pytest.raises(PipelineDefinitionError, match="inside an il.when block") as info:
        il.spec(p)
    assert "any_succeeded" in (info.value.hint or "")


def test_a_skip_the_step_did_not_declare_fails_it_with_the_fix(tmp_path: Path) -> None:
    @il.step
    def undeclared(x: int) -> int:
        raise il.Skip("not today")

    @il.pipeline(name="conf-skip-undeclared")
    def p(x: int = 1):
        return undeclared(x=x)

    r = il.run(p, backend="local", workdir=tmp_path, raise_on_failure=False)
    assert str(r.status) == "failed" and str(r.steps["undeclared"].status) == "failed"
    assert r.error is not None and "may_skip=True" in str(r.error)


def test_a_teardown_input_from_the_body_must_be_optional() -> None:
    @il.step
    def strict_teardown(cluster_id: str) -> None: ...

    @il.pipeline(name="conf-teardown-strict")
    def p():
        c = jp.create(name="a")
        finally_(strict_teardown, cluster_id=c)

    with pytest.raises(PipelineDefinitionError, match="may not exist") as info:
        il.spec(p)
    assert info.value.port == "cluster_id" and "Optional" in (info.value.hint or "")


def test_bind_takes_outputs_of_the_block_only() -> None:
    @il.pipeline(name="conf-teardown-bind-outside")
    def p():
        c = jp.create(name="a")
        with finally_(jp.teardown, label="b", out="x") as block:
            jp.use(cluster=c)
            block.bind(cluster_id=c)

    with pytest.raises(PipelineDefinitionError, match="steps called in this block"):
        il.spec(p)


# -- refused where a backend cannot express them ---------------------------------------------------
REFUSED = [("join.run_if", jp.join_branch), ("skip", jp.self_skip), ("finally.block.reads_output", jp.teardown_run)]
# Argo renders the join rules (depends expressions) and a teardown reading its setup (the run state).
COMPILE_REFUSED = [(f, p, b) for b in ("flyte", "kfp", "argo") for f, p in REFUSED if b != "argo" or f == "skip"]


@pytest.mark.parametrize(("feature", "pipeline", "backend"), COMPILE_REFUSED,
                         ids=[f"{f}-{b}" for f, _, b in COMPILE_REFUSED])
def test_the_compile_backends_without_them_refuse_at_compile_time(
        tmp_path: Path, backend: str, feature: str, pipeline: Any) -> None:
    from interlock.core.backend.protocol import get_backend

    try:
        get_backend(backend)
    except Exception:  # noqa: BLE001 - the backend's extra is not installed here
        pytest.skip(f"{backend} is not installed")
    with pytest.raises(CapabilityError, match=f"cannot express {feature!r}") as info:
        il.compile(pipeline, backend=backend, out=tmp_path / "out")
    assert "run on airflow, flyte2 or local" in (info.value.hint or "")


@pytest.mark.parametrize("backend", [b for b in ("flyte-local", "kfp-local") if b not in JOINS])
def test_the_local_runners_without_join_rules_refuse_before_running(tmp_path: Path, backend: str) -> None:
    if backend not in runnable_backends():
        pytest.skip(f"{backend} is not installed")
    with pytest.raises(CapabilityError, match="join.run_if"):
        il.run(jp.join_branch, backend=backend, workdir=tmp_path)


def test_airflow_renders_each_rule_as_its_trigger_rule(tmp_path: Path) -> None:
    pytest.importorskip("airflow")
    from interlock.adapters.airflow.describe import describe
    from interlock.adapters.airflow.loader import build_dag

    for serial, want in ((False, {"none_failed": "none_failed", "all_succeeded": "all_success",
                                  "any_succeeded": "none_failed_min_one_success",
                                  "one_succeeded": "one_success", "all_done": "all_done"}),
                         (True, dict.fromkeys(jp.RULES, "all_done"))):
        dag = build_dag(describe(il.spec(jp.join_rules), {"serial": serial}), str(tmp_path / "spec.json"))
        rules = {r: dag.get_task(f"after-{r.replace('_', '-')}").trigger_rule for r in jp.RULES}
        got = {r: getattr(t, "value", t) for r, t in rules.items()}
        assert got == want, serial
