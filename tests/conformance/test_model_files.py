"""A file inside a pydantic model or a dataclass (issue 31 item 9): the file field moves as a
folder beside the model's JSON, on every backend whose value store carries folders; refused at
build time, with what to write instead, where a model crosses as a JSON parameter alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import runnable_backends

import interlock as il
from conformance import model_file_pipelines as mf
from interlock.core.backend.protocol import features_used
from interlock.core.base.errors import CapabilityError
from interlock.core.model.codecs import FIELDS_DIR, FILE_REF, file_fields
from interlock.core.model.types import type_of
from interlock.core.model.values import moves_as_json, read_value, value_hash, write_value

MODEL_FILES = runnable_backends("types.model_files")


def test_a_file_in_a_model_reaches_the_next_steps_on_every_backend(tmp_path: Path) -> None:
    assert {"local", "flyte2-local", "airflow-local"} <= set(MODEL_FILES)
    for backend in MODEL_FILES:
        r = il.run(mf.model_files, backend=backend, workdir=tmp_path / backend, rows=4)
        assert str(r.status) == "succeeded" and r.outputs == {"o0": "s1:6 (4 rows)"}, backend


def test_the_file_field_is_a_folder_beside_the_json(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "rows.json").write_text("[1, 2]")
    t = type_of(mf.Shard)
    assert file_fields(t) == ("data", "extra") and not moves_as_json(t)
    write_value(mf.Shard(name="a", rows=2, data=il.Dataset(src, {"rows": 2})), t, tmp_path / "v")
    assert json.loads((tmp_path / "v" / "value.json").read_text()) == {
        "name": "a", "rows": 2, "data": {FILE_REF: "data"}, "extra": None}
    assert (tmp_path / "v" / FIELDS_DIR / "data" / "rows.json").read_text() == "[1, 2]"
    back = read_value(t, tmp_path / "v")
    assert isinstance(back, mf.Shard) and back.extra is None and back.data.metadata == {"rows": 2}
    assert (Path(back.data.path) / "rows.json").read_text() == "[1, 2]"
    # the cache key follows the file's content, not its path
    other = tmp_path / "other"
    other.mkdir()
    (other / "rows.json").write_text("[1, 2]")
    same = mf.Shard(name="a", rows=2, data=il.Dataset(other, {"rows": 2}))
    assert value_hash(same, t) == value_hash(back, t)
    (other / "rows.json").write_text("[1, 3]")
    assert value_hash(same, t) != value_hash(back, t)
    assert moves_as_json(type_of(mf.Bundle)) is False and file_fields(type_of(mf.Bundle)) == ("data",)


def test_a_model_without_files_still_moves_as_json_alone() -> None:
    from conformance.typed_pipelines import Cfg

    assert file_fields(type_of(Cfg)) == () and moves_as_json(type_of(Cfg))


@pytest.mark.parametrize("backend", ["flyte", "kfp", "argo"])
def test_backends_that_pass_a_model_as_json_refuse_it_at_build(tmp_path: Path, backend: str) -> None:
    pytest.importorskip({"flyte": "flytekit", "kfp": "kfp", "argo": "hera"}[backend])
    assert features_used(il.spec(mf.model_files))["types.model_files"] == ["write_shard", "bundle", "summary"]
    with pytest.raises(CapabilityError, match="types.model_files") as info:
        il.compile(mf.model_files, backend=backend, out=tmp_path / "x", image="registry.example/team:1")
    assert "il.Dataset" in (info.value.hint or "")
