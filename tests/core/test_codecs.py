"""One codec row per value kind: every TypeKind has a row, and every row round-trips.

``SAMPLES`` names one annotation and one value per kind. It must cover every kind, so a new
kind fails here until it has a row in ``core.codecs.CODECS`` and a sample, and then every
check below runs for it: annotation -> TypeSpec, spec JSON, value JSON, files, hash.
The DataFrame cases need pandas and skip without it (the core-only tox env has none).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from core_pipelines.basic import Verdict

import interlock as il
from interlock.core.model.codecs import (
    ARTIFACT_META,
    CODECS,
    TypeKind,
    codec,
    from_jsonable,
    json_problem,
    to_jsonable,
    value_matches,
)
from interlock.core.model.types import TypeSpec, type_of
from interlock.core.model.values import check_output, read_value, value_hash, write_value


def _directory(cls: type[il.Dataset] | type[il.Model]) -> Callable[[Path], Any]:
    def make(tmp: Path) -> Any:
        art = cls(tmp / "src", {"snapshot": "2026-11-01", "rows": 2})
        art.path.mkdir()
        (art.path / "part-0.csv").write_text("a,b\n1,2\n")
        (art.path / "sub").mkdir()
        (art.path / "sub" / "w.bin").write_bytes(b"\x00\x01")
        return art
    return make


def _pandas() -> Any:
    return pytest.importorskip("pandas")


def _frame(tmp: Path) -> Any:
    return _pandas().DataFrame({"k": [1, 2], "v": [0.5, 1.5]}, index=[10, 20])


# kind -> (annotation factory, value factory given a scratch directory); factories, so that
# pandas is imported only by the DataFrame cases.
SAMPLES: dict[TypeKind, tuple[Callable[[], Any], Callable[[Path], Any]]] = {
    TypeKind.INT: (lambda: int, lambda tmp: 7),
    TypeKind.FLOAT: (lambda: float, lambda tmp: 2.5),
    TypeKind.STR: (lambda: str, lambda tmp: "snapshot-é"),
    TypeKind.BOOL: (lambda: bool, lambda tmp: True),
    TypeKind.NONE: (lambda: None, lambda tmp: None),
    TypeKind.LIST: (lambda: list[int], lambda tmp: [1, 2, 3]),
    TypeKind.DICT: (lambda: dict[str, float], lambda tmp: {"a": 1.5, "b": -2.0}),
    TypeKind.DATACLASS: (lambda: Verdict, lambda tmp: Verdict(ok=True, score=0.75)),
    TypeKind.DATAFRAME: (lambda: _pandas().DataFrame, _frame),
    TypeKind.DATASET: (lambda: il.Dataset, _directory(il.Dataset)),
    TypeKind.MODEL: (lambda: il.Model, _directory(il.Model)),
    TypeKind.METRICS: (lambda: il.Metrics, lambda tmp: il.Metrics(auc=0.91, loss=0.2)),
    TypeKind.ARTIFACTS: (lambda: list[il.Dataset], lambda tmp: [_directory(il.Dataset)(tmp)]),
}
KINDS = list(TypeKind)


def _sample(kind: TypeKind, tmp: Path) -> tuple[TypeSpec, Any]:
    annotation, make = SAMPLES[kind]
    return type_of(annotation()), make(tmp)


def _files(d: il.Dataset | il.Model) -> dict[str, bytes]:
    return {
        str(p.relative_to(d.path)): p.read_bytes()
        for p in d.path.rglob("*") if p.is_file() and p.name != ARTIFACT_META
    }


def _same(a: Any, b: Any) -> bool:
    """Equal as values: frames by content, directory artifacts by files and metadata."""
    if type(a).__name__ == "DataFrame":
        return type(b) is type(a) and a.equals(b) and list(a.index) == list(b.index)
    if isinstance(a, list) and a and isinstance(a[0], il.Dataset | il.Model):  # a list of artifacts
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, il.Dataset | il.Model):
        return type(a) is type(b) and a.metadata == b.metadata and _files(a) == _files(b) != {}
    return type(a) is type(b) and a == b


def test_every_kind_has_one_row_and_one_sample() -> None:
    assert set(CODECS) == set(TypeKind)
    assert all(codec(kind).kind is kind for kind in TypeKind)
    assert set(SAMPLES) == set(TypeKind), "a new kind needs a sample here, so every check below covers it"


def test_kinds_are_their_json_spelling() -> None:
    # str-valued: the spec's JSON is unchanged, and code comparing to the old strings still works
    for kind in TypeKind:
        t = TypeSpec(kind.value)
        assert t.kind is kind and t.kind == kind.value
        assert json.loads(json.dumps(t.to_json())) == {"kind": kind.value}
        assert TypeSpec.from_json(json.loads(json.dumps(t.to_json()))) == t
    with pytest.raises(ValueError, match="unknown type kind 'tensor'"):
        TypeSpec("tensor")


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_annotation_gives_the_kind(kind: TypeKind) -> None:
    t = type_of(SAMPLES[kind][0]())
    assert t.kind is kind
    assert t.is_artifact is codec(kind).artifact
    assert t.describe() and TypeSpec.from_json(t.to_json()) == t


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_value_fits_its_own_type(kind: TypeKind, tmp_path: Path) -> None:
    t, value = _sample(kind, tmp_path)
    check_output(value, t, "step 's', output 'o0'")  # a returned value of the declared type
    assert value_matches(value, t) is (not t.is_artifact)  # artifacts are never constants
    if not t.is_artifact:
        assert json_problem(to_jsonable(value, t), t, "p") is None  # its JSON form passes the -p check
    other = SAMPLES[TypeKind.STR if kind is not TypeKind.STR else TypeKind.INT][1](tmp_path)
    with pytest.raises(il.InterlockError, match="declared"):
        check_output(other, t, "step 's', output 'o0'")


@pytest.mark.parametrize("kind", [k for k in KINDS if codec(k).has_json], ids=str)
def test_json_round_trip(kind: TypeKind, tmp_path: Path) -> None:
    t, value = _sample(kind, tmp_path)
    text = json.dumps(to_jsonable(value, t), sort_keys=True)
    assert _same(value, from_jsonable(json.loads(text), t))
    optional = TypeSpec.from_json({**t.to_json(), "optional": True})
    assert to_jsonable(None, optional) is None and from_jsonable(None, optional) is None


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_file_round_trip_and_hash(kind: TypeKind, tmp_path: Path) -> None:
    t, value = _sample(kind, tmp_path)
    write_value(value, t, tmp_path / "port")
    back = read_value(t, tmp_path / "port")
    assert _same(value, back)
    # The hash is of the content: the copy read back (another path, another object) hashes alike.
    assert value_hash(back, t) == value_hash(value, t)
    # None crosses as the null marker for every kind, and reads back as None.
    optional = TypeSpec.from_json({**t.to_json(), "optional": True})
    write_value(None, optional, tmp_path / "null")
    assert read_value(optional, tmp_path / "null") is None
    if value is not None:
        assert value_hash(None, optional) != value_hash(value, t)


def test_hash_sees_content_changes(tmp_path: Path) -> None:
    model = SAMPLES[TypeKind.MODEL][1](tmp_path)
    before = value_hash(model, TypeSpec("model"))
    (model.path / "sub" / "w.bin").write_bytes(b"\x00\x02")
    assert value_hash(model, TypeSpec("model")) != before
    frame = _frame(tmp_path)
    changed = frame.copy()
    changed.loc[10, "v"] = 9.0
    assert value_hash(frame, TypeSpec("dataframe")) != value_hash(changed, TypeSpec("dataframe"))


def test_struct_numbers_read_back_as_declared_ints() -> None:
    # JSON from protobuf Struct (KFP) spells every number as a float.
    t = type_of(dict[str, int])
    back = from_jsonable({"a": 2.0, "b": 2.5}, t)
    assert [type(v) for v in back.values()] == [int, float]
    assert [type(v) for v in from_jsonable([3.0], type_of(list))] == [float]  # untyped: left alone
