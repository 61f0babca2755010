"""The names a step's outputs get on KFP (UI, ``task.outputs[...]``, ML Metadata): a single
artifact by its type (``model``), NamedTuple fields as declared, a single parameter as KFP's
``Output``, and ``<type>_out`` where an input already has the type's name."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from kfp_test_pipelines import names

import interlock as il
from interlock.adapters.kfp.backend import KfpLocalBackend
from interlock.adapters.kfp.compile import compile_pipeline
from interlock.adapters.kfp.names import artifact_name, io_names
from interlock.core.backend.protocol import RunOptions, resolve_params
from interlock.core.model.types import type_of

MLMD_PYTHON = os.environ.get("INTERLOCK_MLMD_PYTHON")
needs_mlmd = pytest.mark.skipif(
    not (MLMD_PYTHON and os.access(MLMD_PYTHON, os.X_OK)),
    reason="no ml-metadata interpreter: set INTERLOCK_MLMD_PYTHON (see interlock.plugins.mlmd.setup_env)",
)


def outputs_of(pb: Any, comp: str) -> tuple[set[str], set[str]]:
    """(artifact names, parameter names) a component declares, read back through kfp."""
    defs = pb.components[comp].output_definitions
    return set(defs.artifacts), set(defs.parameters)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from kfp import components

    path = compile_pipeline(il.spec(names.named), tmp_path_factory.mktemp("ir") / "names.yaml")
    return components.load_component_from_file(str(path)).pipeline_spec


def test_a_single_artifact_output_is_named_by_its_type(loaded: Any) -> None:
    assert outputs_of(loaded, "comp-sub-trained-load") == ({"dataset"}, set())
    assert outputs_of(loaded, "comp-sub-trained-train") == ({"model"}, set())
    assert outputs_of(loaded, "comp-summary") == ({"metrics"}, set())
    # ...and readers wire to that name.
    dag = loaded.components["comp-sub-trained"].dag
    arg = dag.tasks["sub-trained-train"].inputs.artifacts["dataset"].task_output_artifact
    assert (arg.producer_task, arg.output_artifact_key) == ("sub-trained-load", "dataset")


def test_a_sub_pipelines_single_output_is_kfps_output_as_a_pipelines(loaded: Any) -> None:
    assert outputs_of(loaded, "comp-sub-trained") == ({"Output"}, set())
    out = loaded.components["comp-sub-trained"].dag.outputs.artifacts["Output"].artifact_selectors[0]
    assert (out.producer_subtask, out.output_artifact_key) == ("sub-trained-train", "model")
    arg = loaded.root.dag.tasks["tune"].inputs.artifacts["model"].task_output_artifact
    assert (arg.producer_task, arg.output_artifact_key) == ("sub-trained", "Output")


def test_an_input_with_the_types_name_keeps_it_and_the_output_gets_out(loaded: Any) -> None:
    assert set(loaded.components["comp-tune"].input_definitions.artifacts) == {"model"}
    assert outputs_of(loaded, "comp-tune") == ({"model_out"}, set())
    arg = loaded.root.dag.tasks["evaluate"].inputs.artifacts["model"].task_output_artifact
    assert (arg.producer_task, arg.output_artifact_key) == ("tune", "model_out")


def test_named_outputs_keep_their_names_and_a_single_parameter_is_kfps_output(loaded: Any) -> None:
    assert outputs_of(loaded, "comp-evaluate") == ({"report"}, {"auc"})
    assert outputs_of(loaded, "comp-weight") == (set(), {"Output"})
    arg = loaded.root.dag.tasks["summary"].inputs.artifacts["report"].task_output_artifact
    assert (arg.producer_task, arg.output_artifact_key) == ("evaluate", "report")


def test_no_positional_port_name_reaches_the_ir(loaded: Any) -> None:
    for name, comp in loaded.components.items():
        defs = comp.output_definitions
        assert not {"o0", "o1"} & {*defs.artifacts, *defs.parameters}, name


def test_type_names_follow_kfps_artifact_classes() -> None:
    import pandas as pd

    assert artifact_name(type_of(il.Model)) == "model"
    assert artifact_name(type_of(il.Dataset)) == "dataset"
    assert artifact_name(type_of(pd.DataFrame)) == "dataset"
    assert artifact_name(type_of(il.Metrics)) == "metrics"
    assert io_names(il.spec(names.named).step("tune"))[1] == {"o0": "model_out"}


@needs_mlmd
def test_kfp_local_writes_reads_and_records_lineage_under_those_names(tmp_path: Path) -> None:
    from interlock.plugins.mlmd import LineageStore

    spec = il.spec(names.named)
    options = RunOptions(run_id=f"r-{uuid.uuid4().hex[:8]}", workdir=tmp_path / "work", sleeper=lambda s: None)
    result = KfpLocalBackend().run(spec, resolve_params(spec, {}), options)
    assert result.status == "succeeded", result.error
    tuned, auc, summary, weight = (result.outputs[k] for k in ("o0", "o1", "o2", "o3"))
    w = sum(range(4)) * 2 + 1
    assert weight == w and auc == pytest.approx(0.5 + w / 100) and summary["double"] == 2.0 * w
    assert isinstance(tuned, il.Model) and tuned.metadata == {"tuned": True}
    assert tuned.path.name == "model_out"  # kfp's URI ends in the output's name
    assert tuned.path.is_relative_to(tmp_path / "work" / "kfp" / "root")
    with LineageStore(sqlite_path=tmp_path / "work" / "lineage" / "mlmd.sqlite") as store:
        [root] = store.upstream(str(tuned.path)).roots
        assert (root.name, root.type) == ("model_out", "system.Model")  # as KFP's own MLMD records name it
        producer = root.produced_by
        assert producer is not None and producer.step == "tune"
        [model] = producer.inputs
        assert model.name == "model" and model.produced_by is not None and model.produced_by.step == "sub-trained.train"
        assert [a.name for a in model.produced_by.inputs] == ["dataset"]
