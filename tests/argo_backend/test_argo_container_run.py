"""A compiled Workflow's containers, run as local processes with what the manifest gives them
(manifest_runner): the task entry and the manifest agree without a controller, and the
outputs are the ones the local backend gives."""

from __future__ import annotations

import json
from pathlib import Path

import argo_pipelines as ap
import yaml
from manifest_runner import ManifestRunner

import interlock as il
from interlock.adapters.argo.exit_codes import GAVE_UP


def _compile(pipeline: il.Pipeline, out: Path) -> dict:
    [path] = il.compile(pipeline, backend="argo", out=out, image="registry.example/team:1", state_pvc="runs")
    return yaml.safe_load(path.read_text())


def test_the_containers_write_what_the_manifest_reads_and_match_local(tmp_path: Path) -> None:
    doc = _compile(ap.chain, tmp_path / "build")
    runner = ManifestRunner(doc, tmp_path / "wf", params={"n": "3"})
    main = runner.run()
    assert main.status == "Succeeded", {k: r.stderr[-2000:] for k, r in runner.ran.items()}
    ran = {k.split("/")[-1]: r for k, r in runner.ran.items()}
    assert ran["load"].artifacts["o0"].is_dir()  # a DataFrame: the port's directory, tarred by Argo
    assert len(ran["load"].parameters["o0-hash"]) == 64  # its content hash, for readers' memoize keys
    assert json.loads(ran["summarize"].parameters["o0"]) == {"rows": 3, "label": "t:2026-11-01"}
    assert ran["double"].parameters["o0"] == "6"
    assert ran["shout"].status == "Succeeded"
    assert ran["shout"].parameters["o0"] == "T:2026-11-01" * 2  # a str travels as its own text
    local = il.run(ap.chain, backend="local", workdir=tmp_path / "local", n=3)
    assert list(local.outputs.values()) == [6, "t:2026-11-01"]
    assert local.steps["shout"].status == "succeeded"
    receipts = list((tmp_path / "wf" / "volume").rglob("receipt.json"))  # the exit handler's
    assert len(receipts) == 1
    receipt = json.loads(receipts[0].read_text())
    assert receipt["backend"] == "argo" and receipt["run_id"] == "wf-test"


def test_a_closed_gate_skips_its_block(tmp_path: Path) -> None:
    doc = _compile(ap.chain, tmp_path / "build")
    runner = ManifestRunner(doc, tmp_path / "wf", params={"n": "2"})  # double = 4: not > 4
    assert runner.run().status == "Succeeded"
    ran = {k.split("/")[-1]: r for k, r in runner.ran.items()}
    assert ran["double"].parameters["o0"] == "4"
    assert ran["shout"].status == "Skipped"


def test_a_fatal_failure_exits_with_the_code_the_retry_expression_refuses(tmp_path: Path) -> None:
    doc = _compile(ap.fatal, tmp_path / "build")
    [t] = [t for t in doc["spec"]["templates"] if t["name"] == "refuse"]
    rs = t["retryStrategy"]
    assert rs["limit"] == 3 + 2  # contention attempts + preempted
    assert str(GAVE_UP) not in rs["expression"] and "82" in rs["expression"] and "83" in rs["expression"]
    runner = ManifestRunner(doc, tmp_path / "wf")
    assert runner.run().status == "Failed"
    ran = runner.ran["main/refuse"]
    assert ran.code == GAVE_UP, ran.stderr
    assert "VALIDATION" in ran.stderr or "FATAL" in ran.stderr
