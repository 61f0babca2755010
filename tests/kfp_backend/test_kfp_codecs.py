"""The KFP codec table: one row per kind, and every kind survives KFP's own transport.

Parameters go through a protobuf Struct (what KFP does to every JSON parameter: 3 becomes
3.0) and artifacts through real ``kfp.dsl`` artifact objects, and come back with
``to_value``: one pass through the KFP row and core's row. A new kind fails
``test_every_kind_has_a_row`` until it has a row and a sample here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from google.protobuf import json_format, struct_pb2
from kfp import dsl
from kfp_test_pipelines.typed import TrainParams

import interlock as il
from interlock.adapters.kfp.types import (
    ARTIFACT_CLASSES,
    KFP_CODECS,
    kfp_type,
    read_artifact,
    to_parameter,
    to_value,
    write_artifact,
)
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import ARTIFACT_META, TypeKind, codec
from interlock.core.model.types import TypeSpec, type_of


def _directory(cls: type[il.Dataset] | type[il.Model]) -> Callable[[Path], Any]:
    def make(tmp: Path) -> Any:
        art = cls(tmp / "src", {"snapshot": "2026-11-01", "epochs": 3})
        (art.path / "sub").mkdir(parents=True)
        (art.path / "sub" / "w.bin").write_bytes(b"\x00\x01")
        return art
    return make


SAMPLES: dict[TypeKind, list[tuple[Any, Callable[[Path], Any]]]] = {
    TypeKind.INT: [(int, lambda tmp: 7)],
    TypeKind.FLOAT: [(float, lambda tmp: 2.5)],
    TypeKind.STR: [(str, lambda tmp: "snapshot")],
    TypeKind.BOOL: [(bool, lambda tmp: True)],
    TypeKind.LIST: [(list[int], lambda tmp: [1, 2]), (list, lambda tmp: ["a", 2.5])],
    TypeKind.DICT: [(dict[str, int], lambda tmp: {"a": 1}), (dict, lambda tmp: {"a": ["x"]})],
    TypeKind.DATACLASS: [(TrainParams, lambda tmp: TrainParams(lr=0.5, epochs=4, tags=["a"]))],
    TypeKind.DATAFRAME: [(pd.DataFrame, lambda tmp: pd.DataFrame({"k": [1, 2], "v": [0.5, 1.5]}, index=[3, 4]))],
    TypeKind.DATASET: [(il.Dataset, _directory(il.Dataset))],
    TypeKind.MODEL: [(il.Model, _directory(il.Model))],
    TypeKind.METRICS: [(il.Metrics, lambda tmp: il.Metrics(auc=0.91, loss=0.2))],
}
# Kinds KFP only delivers to a component (dsl.Collected artifacts): no output form, so no
# round trip through one artifact; test_a_collected_list_of_artifacts_reads_as_the_list covers them.
INPUT_ONLY = {TypeKind.ARTIFACTS}
CASES = [
    pytest.param(annotation, make, id=f"{kind}-{i}")
    for kind, samples in SAMPLES.items() for i, (annotation, make) in enumerate(samples)
]


def test_every_kind_has_a_row() -> None:
    assert set(KFP_CODECS) == set(TypeKind)
    assert all(KFP_CODECS[k].kind is k for k in TypeKind)
    with_form = {k for k, row in KFP_CODECS.items() if row.form is not None}
    assert set(SAMPLES) | INPUT_ONLY == with_form, "a kind with a KFP form needs a sample here"
    for kind in with_form:
        row = KFP_CODECS[kind]
        assert row.form is not None and row.form.is_artifact is codec(kind).artifact
        # artifact rows move files; parameter rows are the shared JSON rule
        assert (row.write is not None and row.read is not None) is (row.form.is_artifact and kind not in INPUT_ONLY)
        assert row.read is not None or not row.form.is_artifact
    assert set(ARTIFACT_CLASSES) == {k for k in with_form - INPUT_ONLY if codec(k).artifact}
    assert {title for _, title in ARTIFACT_CLASSES.values()} == {"system.Dataset", "system.Model", "system.Metrics"}
    for kind in set(TypeKind) - with_form:
        with pytest.raises(PipelineDefinitionError, match="no KFP form"):
            kfp_type(TypeSpec(kind))


def _struct(value: Any) -> Any:
    """What KFP hands a component for a JSON parameter: the value through a protobuf Struct."""
    msg = struct_pb2.Value()
    json_format.ParseDict(value, msg)
    return json_format.MessageToDict(msg)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and a.equals(b) and list(a.index) == list(b.index)
    if isinstance(a, il.Dataset | il.Model):
        def files(d: Any) -> dict[str, bytes]:
            return {str(p.relative_to(d.path)): p.read_bytes() for p in d.path.rglob("*")
                    if p.is_file() and p.name != ARTIFACT_META}
        return type(a) is type(b) and a.metadata == b.metadata and files(a) == files(b) != {}
    if isinstance(a, list):  # element types too: a Struct returns every number as a float
        return type(b) is list and [type(x) for x in a] == [type(x) for x in b] and a == b
    if isinstance(a, dict) and not isinstance(a, il.Metrics):
        return type(b) is dict and {k: type(v) for k, v in a.items()} == {k: type(v) for k, v in b.items()} and a == b
    return type(a) is type(b) and a == b


def _through_kfp(value: Any, t: TypeSpec, tmp: Path, name: str) -> Any:
    kt = kfp_type(t)
    if kt.is_artifact:
        cls = getattr(dsl, kt.artifact or "Artifact")
        out = cls(uri=str(tmp / name))
        write_artifact(value, t, out)
        # the consumer gets a new artifact object: same URI, the metadata KFP recorded
        return to_value(cls(uri=out.uri, metadata=dict(out.metadata)), None, t, t)
    return to_value(_struct(to_parameter(value, t, f"step 's', output {name!r}")), None, t, t)


@pytest.mark.parametrize(("annotation", "make"), CASES)
def test_round_trip_through_kfp(annotation: Any, make: Callable[[Path], Any], tmp_path: Path) -> None:
    t = type_of(annotation)
    value = make(tmp_path)
    assert _same(value, _through_kfp(value, t, tmp_path, "plain"))
    optional = TypeSpec.from_json({**t.to_json(), "optional": True})
    assert _through_kfp(None, optional, tmp_path, "none") is None
    assert _same(value, _through_kfp(value, optional, tmp_path, "some"))


def test_a_collected_list_of_artifacts_reads_as_the_list(tmp_path: Path) -> None:
    made = []
    for i in range(2):
        (tmp_path / str(i)).mkdir()
        made.append(_directory(il.Dataset)(tmp_path / str(i)))
    arts = []
    for i, d in enumerate(made):
        out = dsl.Dataset(uri=str(tmp_path / f"a{i}"))
        write_artifact(d, TypeSpec("dataset"), out)
        arts.append(dsl.Dataset(uri=out.uri, metadata=dict(out.metadata)))
    t = type_of(list[il.Dataset])
    assert kfp_type(t).input_annotation() == "Input[List[Artifact]]"
    back = to_value(arts, None, t, t)
    assert len(back) == 2 and all(_same(a, b) for a, b in zip(made, back, strict=True))


def test_artifact_rows_keep_core_file_formats(tmp_path: Path) -> None:
    frame = SAMPLES[TypeKind.DATAFRAME][0][1](tmp_path)
    out = dsl.Dataset(uri=str(tmp_path / "frame"))
    write_artifact(frame, TypeSpec("dataframe"), out)
    assert pd.read_parquet(out.path).equals(frame)  # a parquet file a plain KFP component can read
    model = SAMPLES[TypeKind.MODEL][0][1](tmp_path)
    out = dsl.Model(uri=str(tmp_path / "model"))
    write_artifact(model, TypeSpec("model"), out)
    assert (Path(out.path) / ARTIFACT_META).is_file()  # core's directory, metadata file included
    back = read_artifact(dsl.Model(uri=out.uri), TypeSpec("model"))
    assert back.metadata == model.metadata
