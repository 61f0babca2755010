"""The conformance pipelines, compiled for argo and run container by container as local
processes (manifest_runner: what an Argo controller would do with the manifest), record the
same step statuses and run status in the exit handler's receipt as the local backend gives.

Cases: every conformance pipeline that runs with its defaults (the others are sub-pipelines).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from manifest_runner import ManifestRunner
from test_argo_conformance_compile import PIPELINES, REFUSED_HERE

import interlock as il
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError
from interlock.core.dsl.pipeline import Pipeline


def _runnable(p: Pipeline) -> bool:
    return all(x.has_default or x.name == "out" for x in il.spec(p).params)


CASES = [(n, p) for n, p in PIPELINES if _runnable(p)]


@pytest.mark.parametrize("name, pipeline", CASES, ids=[n for n, _ in CASES])
def test_argo_records_what_local_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                      pipeline: Pipeline) -> None:
    monkeypatch.chdir(tmp_path)  # a step that writes beside it (MLflow's ./mlruns) writes here
    spec = il.spec(pipeline)
    kw = {"out": str(tmp_path / "local-out.txt")} if any(x.name == "out" for x in spec.params) else {}
    try:
        [path] = il.compile(pipeline, backend="argo", out=tmp_path / "build", image="registry.example/team:1",
                            state_pvc="runs")
    except CapabilityError:
        pytest.skip("refused at build time (test_argo_conformance_compile checks the refusal)")
    except PipelineDefinitionError:
        if name not in REFUSED_HERE:
            raise
        pytest.skip(f"refused at build time: {REFUSED_HERE[name]}")
    doc = yaml.safe_load(path.read_text())
    local = il.run(pipeline, backend="local", workdir=tmp_path / "local", raise_on_failure=False, **kw)
    params = {"out": str(tmp_path / "argo-out.txt")} if kw else None
    runner = ManifestRunner(doc, tmp_path / "wf", params=params, fork=True)
    runner.run()
    [receipt_path] = (tmp_path / "wf" / "volume").rglob("receipt.json")
    receipt = json.loads(receipt_path.read_text())
    assert receipt["status"] == str(local.status)
    assert {s["node"]: s["status"] for s in receipt["steps"]} == {n: str(s.status) for n, s in local.steps.items()}
