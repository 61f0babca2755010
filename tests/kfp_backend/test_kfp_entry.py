"""The component side, in-process: KFP artifacts and parameters <-> interlock values, and the
shim's FATAL marker stopping a KFP retry of a step that already failed FATAL."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from kfp import dsl
from kfp_test_pipelines import failing, typed

import interlock as il
from interlock.adapters.kfp.entry import read_artifact, run_node, to_value, write_artifact
from interlock.core.base.errors import SerializationError, StepFailed
from interlock.core.model.spec import Binding
from interlock.core.model.types import TypeSpec, type_of
from interlock.core.run.files import last_object


def test_dataframe_is_a_parquet_file_at_the_artifact_path(tmp_path: Path) -> None:
    df = pd.DataFrame({"k": [1, 2, 3], "v": [0.5, 1.5, 2.5]}, index=[10, 20, 30])
    art = dsl.Dataset(uri=str(tmp_path / "out" / "o0"))
    write_artifact(df, TypeSpec("dataframe"), art)
    assert Path(art.path).is_file()
    pd.testing.assert_frame_equal(pd.read_parquet(art.path), df)  # plain KFP components can read it
    assert art.metadata["rows"] == 3 and art.metadata["columns"] == ["k", "v"]
    back = read_artifact(dsl.Dataset(uri=art.uri), TypeSpec("dataframe"))
    pd.testing.assert_frame_equal(back, df)


def test_model_is_a_directory_with_its_metadata(tmp_path: Path) -> None:
    model = il.Model.new(metadata={"framework": "xgboost", "epochs": 3})
    (model.path / "weights.bin").write_bytes(b"\x00\x01")
    art = dsl.Model(uri=str(tmp_path / "model"))
    write_artifact(model, TypeSpec("model"), art)
    assert (Path(art.path) / "weights.bin").read_bytes() == b"\x00\x01"
    assert art.metadata["framework"] == "xgboost"
    back = read_artifact(dsl.Model(uri=art.uri), TypeSpec("model"))
    assert isinstance(back, il.Model) and back.metadata == {"framework": "xgboost", "epochs": 3}


def test_metrics_are_logged_and_the_file_is_written(tmp_path: Path) -> None:
    art = dsl.Metrics(uri=str(tmp_path / "metrics"))
    write_artifact(il.Metrics(auc=0.91, loss=0.2), TypeSpec("metrics"), art)
    assert art.metadata["auc"] == 0.91 and art.metadata["loss"] == 0.2  # KFP UI reads metadata
    assert json.loads(Path(art.path).read_text()) == {"auc": 0.91, "loss": 0.2}  # kfp-local's cache needs the file
    assert read_artifact(dsl.Metrics(uri=art.uri), TypeSpec("metrics")) == {"auc": 0.91, "loss": 0.2}
    # Metrics from a plain KFP component live only in its metadata.
    foreign = dsl.Metrics(uri=str(tmp_path / "nothing-here"), metadata={"acc": 0.7, "note": "x"})
    assert read_artifact(foreign, TypeSpec("metrics")) == {"acc": 0.7}


def test_struct_numbers_come_back_as_declared() -> None:
    t = type_of(typed.TrainParams)
    raw = {"lr": 0.5, "epochs": 3.0, "tags": ["a"]}  # protobuf Struct turned 3 into 3.0
    value = to_value(raw, None, t)
    assert value == typed.TrainParams(lr=0.5, epochs=3, tags=["a"]) and isinstance(value.epochs, int)
    counts = to_value({"a": 2.0}, None, type_of(dict[str, int]))
    assert counts == {"a": 2} and isinstance(counts["a"], int)
    assert to_value([1.0, 2.5], None, type_of(list[float])) == [1.0, 2.5]
    mixed = to_value([1.0, 2.5], None, type_of(list[int]))
    assert [type(v) for v in mixed] == [int, float]  # only integral floats become ints
    assert [type(v) for v in to_value([3.0], None, type_of(list))] == [float]  # untyped: nothing says int
    # A binding that picks a dataclass field: KFP delivers the whole struct.
    rows = to_value({"auc": 0.9, "rows": 4.0, "approved": True}, Binding.of_output("approve", "o0", ("rows",)), TypeSpec("int"))
    assert rows == 4 and isinstance(rows, int)


def test_optional_outputs_are_json_text_and_none_is_refused_otherwise() -> None:
    from interlock.adapters.kfp.entry import to_parameter

    assert to_parameter(None, TypeSpec("int", optional=True), "step 'x', output 'o0'") == "null"
    assert to_parameter(4, TypeSpec("int", optional=True), "step 'x', output 'o0'") == "4"
    assert to_value("null", None, TypeSpec("int", optional=True)) is None
    assert to_value("4.0", None, TypeSpec("int", optional=True)) == 4
    with pytest.raises(SerializationError, match="cannot be None"):
        to_parameter(None, TypeSpec("int"), "step 'x', output 'o0'")


@pytest.fixture
def run_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("INTERLOCK_RUN_ID", "r-entry-1")
    monkeypatch.setenv("INTERLOCK_STATE_DIR", str(state))
    monkeypatch.setenv("INTERLOCK_RETRY_IN_PROCESS", "FATAL,TRANSIENT")
    monkeypatch.setenv("INTERLOCK_BACKEND", "kfp")
    return state


def test_run_node_calls_the_shim_and_returns_kfp_outputs(run_env: Path, tmp_path: Path) -> None:
    spec = il.spec(typed.typed)
    frame = dsl.Dataset(uri=str(tmp_path / "frame"))
    assert run_node("kfp_test_pipelines.typed:typed", "make_frame", spec.step("make_frame").fingerprint,
                    {"n": 3, "scale": 2.0, "dataset": frame}) is None
    model, metrics = dsl.Model(uri=str(tmp_path / "model")), dsl.Metrics(uri=str(tmp_path / "metrics"))
    rows, counts = run_node(
        "kfp_test_pipelines.typed:typed", "train", spec.step("train").fingerprint,
        {"df": dsl.Dataset(uri=frame.uri), "params": {"lr": 0.5, "epochs": 2.0, "tags": []}, "model": model, "metrics": metrics},
    )
    # dict[str, int] travels as JSON text: its ints and key order exactly as the step returned them
    assert (rows, counts) == (3, '{"rows": 3, "epochs": 2}')
    assert json.loads((Path(model.path) / "weights.json").read_text()) == {"w": (0 + 2 + 4) * 0.5}
    assert metrics.metadata["auc"] == pytest.approx(0.7)
    fragment = last_object((run_env / "receipts" / "train.json").read_bytes())
    assert fragment["status"] == "succeeded" and fragment["snapshots"] == [{"id": "frame-v1", "source": "make_frame"}]


def test_stale_image_code_is_refused(run_env: Path) -> None:
    with pytest.raises(StepFailed, match="differs from the compiled pipeline"):
        run_node("kfp_test_pipelines.typed:typed", "total", "0" * 64, {"counts": {"a": 1}})


def test_a_kfp_retry_after_fatal_exits_in_milliseconds(run_env: Path, tmp_path: Path) -> None:
    spec = il.spec(failing.fatal)
    fp = spec.step("doomed").fingerprint
    markers = tmp_path / "calls"
    with pytest.raises(StepFailed) as first:
        run_node("kfp_test_pipelines.failing:fatal", "doomed", fp, {"marker_dir": str(markers)})
    assert first.value.kind == "FATAL" and first.value.retryable is False
    assert (run_env / "markers" / "doomed.fatal.json").exists()
    t0 = time.perf_counter()
    with pytest.raises(StepFailed, match="already failed FATAL"):
        run_node("kfp_test_pipelines.failing:fatal", "doomed", fp, {"marker_dir": str(markers)})
    assert time.perf_counter() - t0 < 1.0
    assert (markers / "doomed").read_text() == "1"  # the user's code ran once


def test_contention_is_left_to_kfp_retries(run_env: Path, tmp_path: Path) -> None:
    spec = il.spec(failing.contention)
    with pytest.raises(StepFailed) as info:
        run_node("kfp_test_pipelines.failing:contention", "squeezed", spec.step("squeezed").fingerprint,
                 {"marker_dir": str(tmp_path / "c")})
    assert info.value.kind == "CONTENTION" and info.value.backend_should_retry is True  # a non-zero exit for set_retry
    assert not (run_env / "markers" / "squeezed.fatal.json").exists()


def test_cluster_state_is_per_run_under_the_state_volume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.adapters.kfp.entry import run_context

    monkeypatch.delenv("INTERLOCK_STATE_DIR", raising=False)
    monkeypatch.delenv("INTERLOCK_RUN_ID", raising=False)
    monkeypatch.setenv("KFP_RUN_ID", "8f2c-run")  # from the pod label, via the downward API
    monkeypatch.setenv("INTERLOCK_STATE_ROOT", str(tmp_path / "pvc"))
    ctx = run_context(il.spec(failing.fatal))
    assert ctx.run_id == "8f2c-run"
    assert ctx.state_dir == tmp_path / "pvc" / "runs" / "8f2c-run" / "state"  # a marker never blocks another run


def test_dataset_directory_round_trip(tmp_path: Path) -> None:
    ds = il.Dataset.new(metadata={"snapshot": "2026-11-01"})
    (ds.path / "part-0.csv").write_text("a,b\n1,2\n")
    art = dsl.Dataset(uri=str(tmp_path / "ds"))
    write_artifact(ds, TypeSpec("dataset"), art)
    back = read_artifact(dsl.Dataset(uri=art.uri), TypeSpec("dataset"))
    assert isinstance(back, il.Dataset) and back.metadata == {"snapshot": "2026-11-01"}
    assert (back.path / "part-0.csv").read_text() == "a,b\n1,2\n"
    assert art.metadata["snapshot"] == "2026-11-01" and art.metadata["interlock_type"] == "il.Dataset"


def test_exit_task_assembles_the_receipt_from_fragments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.adapters.kfp.receipt_task import finish_run

    monkeypatch.delenv("INTERLOCK_STATE_DIR", raising=False)
    monkeypatch.setenv("INTERLOCK_STATE_ROOT", str(tmp_path / "pvc"))
    monkeypatch.setenv("KFP_RUN_ID", "run-77")
    spec = il.spec(failing.fatal)
    with pytest.raises(StepFailed):  # the first task fails FATAL in its pod
        run_node("kfp_test_pipelines.failing:fatal", "doomed", spec.step("doomed").fingerprint,
                 {"marker_dir": str(tmp_path / "calls")})
    path = Path(finish_run("kfp_test_pipelines.failing:fatal", {"marker_dir": str(tmp_path / "calls")}, "FAILED"))
    assert path == tmp_path / "pvc" / "runs" / "run-77" / "state" / "receipt.json"
    receipt = json.loads(path.read_text())
    assert receipt["run_id"] == "run-77" and receipt["status"] == "failed"
    steps = {s["node"]: s for s in receipt["steps"]}
    assert steps["doomed"]["status"] == "failed" and steps["doomed"]["failure_kinds"] == ["FATAL"]
    assert steps["after_doomed"]["status"] == "not-run"
    assert receipt["parameters"] == {"marker_dir": str(tmp_path / "calls")}
