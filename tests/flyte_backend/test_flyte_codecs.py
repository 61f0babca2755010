"""The Flyte codec table: one row per kind, and every kind survives flytekit's own round trip.

value -> to_flyte -> flytekit literal (TypeEngine, with the python type of the row) -> back
to Python -> from_flyte, for one sample of every kind that has a Flyte form. A new kind fails
``test_every_kind_has_a_row`` until it has a row and a sample here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from flyte_pipelines.basic import TrainParams

import interlock as il
from interlock.adapters.flyte.types import FLYTE_CODECS, from_flyte, python_type, to_flyte
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import ARTIFACT_META, TypeKind
from interlock.core.model.types import TypeSpec, type_of


def _directory(cls: type[il.Dataset] | type[il.Model]) -> Callable[[Path], Any]:
    def make(tmp: Path) -> Any:
        art = cls(tmp / "src", {"snapshot": "2026-11-01"})
        (art.path / "sub").mkdir(parents=True)
        (art.path / "sub" / "w.bin").write_bytes(b"\x00\x01")
        return art
    return make


# kind -> samples (annotation, value factory); untyped list/dict travel differently (JSON text).
SAMPLES: dict[TypeKind, list[tuple[Any, Callable[[Path], Any]]]] = {
    TypeKind.INT: [(int, lambda tmp: 7)],
    TypeKind.FLOAT: [(float, lambda tmp: 2.5)],
    TypeKind.STR: [(str, lambda tmp: "snapshot")],
    TypeKind.BOOL: [(bool, lambda tmp: False)],
    TypeKind.LIST: [(list[int], lambda tmp: [1, 2]), (list, lambda tmp: [1, {"a": [2.5]}])],
    TypeKind.DICT: [(dict[str, float], lambda tmp: {"a": 1.5}), (dict, lambda tmp: {"a": [1, "x"]})],
    TypeKind.DATACLASS: [(TrainParams, lambda tmp: TrainParams(lr=0.5, epochs=3))],
    TypeKind.DATAFRAME: [(pd.DataFrame, lambda tmp: pd.DataFrame({"k": [1, 2], "v": [0.5, 1.5]}))],
    TypeKind.DATASET: [(il.Dataset, _directory(il.Dataset))],
    TypeKind.MODEL: [(il.Model, _directory(il.Model))],
    TypeKind.METRICS: [(il.Metrics, lambda tmp: il.Metrics(auc=0.91))],
    TypeKind.ARTIFACTS: [(list[il.Dataset], lambda tmp: [_directory(il.Dataset)(tmp)])],
}
CASES = [
    pytest.param(annotation, make, id=f"{kind}-{i}")
    for kind, samples in SAMPLES.items() for i, (annotation, make) in enumerate(samples)
]


def test_every_kind_has_a_row() -> None:
    assert set(FLYTE_CODECS) == set(TypeKind)
    assert all(FLYTE_CODECS[k].kind is k for k in TypeKind)
    with_form = {k for k, row in FLYTE_CODECS.items() if row.python is not None}
    assert set(SAMPLES) == with_form, "a kind with a Flyte form needs a sample here"
    for kind in set(TypeKind) - with_form:
        with pytest.raises(PipelineDefinitionError, match="no Flyte equivalent"):
            python_type(TypeSpec(kind))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and a.equals(b)
    if isinstance(a, list) and a and isinstance(a[0], il.Dataset | il.Model):  # a list of artifacts
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, il.Dataset | il.Model):
        def files(d: Any) -> dict[str, bytes]:
            return {str(p.relative_to(d.path)): p.read_bytes() for p in d.path.rglob("*")
                    if p.is_file() and p.name != ARTIFACT_META}
        return type(a) is type(b) and a.metadata == b.metadata and files(a) == files(b) != {}
    return type(a) is type(b) and a == b


def _through_flytekit(value: Any, t: TypeSpec, tmp: Path) -> Any:
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.type_engine import TypeEngine

    ctx = FlyteContextManager.current_context()
    py = python_type(t)
    lit = TypeEngine.to_literal(ctx, to_flyte(value, t, tmp), py, TypeEngine.to_literal_type(py))
    return from_flyte(TypeEngine.to_python_value(ctx, lit, py), t)


@pytest.mark.parametrize(("annotation", "make"), CASES)
def test_round_trip_through_flytekit(annotation: Any, make: Callable[[Path], Any], tmp_path: Path) -> None:
    t = type_of(annotation)
    value = make(tmp_path)
    assert _same(value, _through_flytekit(value, t, tmp_path))
    optional = TypeSpec.from_json({**t.to_json(), "optional": True})
    assert _through_flytekit(None, optional, tmp_path) is None
    assert _same(value, _through_flytekit(value, optional, tmp_path))
