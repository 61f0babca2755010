"""Pipeline names as Airflow DAG ids and Flyte workflows spell them (``example_branch_operator``,
``Fraud_Retrain_v2``) run as they are on every backend, and compile under the name each
backend's rule allows: Flyte keeps them, KFP gets a DNS label and the compile says so."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from backends import runnable_backends

import interlock as il
from conformance import name_pipelines as npl
from interlock.core.base.errors import PipelineDefinitionError


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_pipeline_named_with_underscores_runs_under_its_name(backend: str, tmp_path: Path) -> None:
    r = il.run(npl.example_branch_operator, backend, workdir=tmp_path, progress=False, pick="b")
    assert r.pipeline == "example_branch_operator" and r.outputs == {"o0": "joined:b"}
    assert {n: str(s.status) for n, s in r.steps.items()} == {
        "choose": "succeeded", "branch_a": "skipped", "branch_b": "succeeded", "join": "succeeded"}
    r = il.run(npl.capitalised, backend, workdir=tmp_path / "cap", progress=False)
    assert r.pipeline == "Fraud_Retrain_v2" and r.outputs == {"o0": "joined:b"}


def test_kfp_gets_a_dns_name_and_the_compile_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("kfp")
    with caplog.at_level(logging.WARNING):
        [path, *_] = il.compile(npl.capitalised, "kfp", out=tmp_path)
    ir = next(yaml.safe_load_all(path.read_text()))
    assert ir["pipelineInfo"]["name"] == "fraud-retrain-v2"
    assert any("pipeline Fraud_Retrain_v2 is named fraud-retrain-v2 on KFP" in r.getMessage() for r in caplog.records)


def test_flyte_keeps_the_name(tmp_path: Path) -> None:
    pytest.importorskip("flytekit")
    from flyteidl.admin import launch_plan_pb2

    files = il.compile(npl.example_branch_operator, "flyte", out=tmp_path, options={"image": "ghcr.io/acme/p:1"})
    [path] = [p for p in files if p.name.endswith("_example_branch_operator_3.pb")]
    plan = launch_plan_pb2.LaunchPlan()
    plan.ParseFromString(path.read_bytes())
    assert plan.id.name == "example_branch_operator"


@pytest.mark.parametrize("bad", ["a.b", "1st", "x" * 64, "with space"])
def test_names_no_backend_can_hold_are_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(PipelineDefinitionError, match=f"invalid pipeline name {bad!r}") as err:
        il.pipeline(name=bad)(lambda: None)
    assert "a letter, then letters, digits, '_' or '-'" in str(err.value.hint)
