"""Every conformance pipeline compiles for argo and its manifest loads back through hera's
models unchanged (a key they do not know would be dropped: the round trip refuses it), or is
refused at build time for a construct the backend's capabilities say it lacks."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

import interlock as il
from interlock.adapters.argo.manifest import validate
from interlock.core.backend.protocol import get_backend
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError
from interlock.core.dsl.pipeline import Pipeline

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"


def _pipelines() -> list[tuple[str, Pipeline]]:
    found: dict[str, tuple[str, Pipeline]] = {}
    for path in sorted(CONFORMANCE.glob("*_pipelines.py")):
        module = importlib.import_module(f"conformance.{path.stem}")
        for attr, value in vars(module).items():
            if isinstance(value, Pipeline) and value.__module__ == module.__name__:
                found.setdefault(f"{path.stem}:{attr}", (f"{path.stem}:{attr}", value))
    return list(found.values())


PIPELINES = _pipelines()
# Refused at build time: by a capability line that says "unsupported" (the feature), or by the
# renderer for a case a capability line names (the pipeline, and the line).
REFUSED = {"skip", "fallback", "types.model_files", "map.subpipeline", "map.fields"}
REFUSED_HERE = {
    "fanout_pipelines:tolerant_datasets": "map.tolerate: not for artifact outputs",
}


def test_the_conformance_pipelines_are_found() -> None:
    assert len(PIPELINES) > 40


@pytest.mark.parametrize("name, pipeline", PIPELINES, ids=[n for n, _ in PIPELINES])
def test_every_conformance_pipeline_compiles_and_validates(tmp_path: Path, name: str, pipeline: Pipeline) -> None:
    try:
        [path] = il.compile(pipeline, backend="argo", out=tmp_path, image="registry.example/team:1",
                            state_pvc="interlock-runs")
    except CapabilityError as exc:
        assert any(f in str(exc) for f in REFUSED), exc
        return
    except PipelineDefinitionError as exc:
        assert name in REFUSED_HERE, exc
        feature, _, says = REFUSED_HERE[name].partition(": ")
        assert says in get_backend("argo").capabilities().features[feature]
        return
    doc = yaml.safe_load(path.read_text())
    validate(doc)  # again, from the file as written
    assert doc["kind"] in ("Workflow", "CronWorkflow")
    templates = doc["spec"]["templates"] if doc["kind"] == "Workflow" else doc["spec"]["workflowSpec"]["templates"]
    names = {t["name"] for t in templates}
    for t in templates:  # every task runs a template of the manifest
        for task in t.get("dag", {}).get("tasks", []):
            assert task["template"] in names
            for hook in task.get("hooks", {}).values():
                assert hook["template"] in names


def test_a_misspelt_key_fails_the_compile() -> None:
    doc = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"generateName": "x-"},
           "spec": {"entrypoint": "a", "templates": [
               {"name": "a", "container": {"image": "i"}, "retryStrategy": {"limit": 2, "backof": {"duration": "5m"}}}]}}
    with pytest.raises(PipelineDefinitionError, match=r"spec\.templates\[0\]\.retryStrategy\.backof"):
        validate(doc)
