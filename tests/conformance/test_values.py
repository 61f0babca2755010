"""Values are identical across backends: an untyped dict/list, and a typed dict[str, T], keeps
its ints, floats, bools, None and key order (nested too) on local, flyte-local and kfp-local,
both where the next step receives it and in the pipeline's outputs. kfp-local turned ints into
floats and sorted keys (a protobuf Struct), and flyte-local sorted keys."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from backends import runnable_backends

import interlock as il
from conformance import value_pipelines as vp

BACKENDS = runnable_backends()


def assert_identical(got: Any, want: Any, where: str = "value") -> None:
    """Equal, with the same type at every level and the same dict key order."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} {got!r} != {type(want).__name__} {want!r}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_identical(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_identical(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def test_assert_identical_catches_what_the_backends_got_wrong() -> None:
    with pytest.raises(AssertionError):
        assert_identical({"a": 1.0}, {"a": 1})
    with pytest.raises(AssertionError):
        assert_identical({"a": 1, "b": 2}, {"b": 2, "a": 1})
    with pytest.raises(AssertionError):
        assert_identical([True], [1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("values")
    return {b: il.run(vp.untyped_values, backend=b, workdir=tmp / b) for b in BACKENDS}


@pytest.mark.parametrize("backend", BACKENDS)
def test_untyped_values_reach_the_next_step_and_the_caller_unchanged(runs: dict[str, Any], backend: str) -> None:
    record = {**vp.RECORD, "scaled": 8}
    items = [*vp.ITEMS, 4]
    want = {
        "o0": record, "o1": items, "o2": record, "o3": items,
        "o4": [repr(vp.shape(record)), repr(vp.shape(items))],
        "o5": repr(vp.shape({"z": 4, "a": 2, "m": 3})),
    }
    r = runs[backend]
    assert str(r.status) == "succeeded"
    # Typed dict[str, int] too: kfp-local used to sort its keys (a KFP STRUCT); it travels as
    # JSON text now, so its key order is the step's on every backend.
    assert_identical(dict(r.outputs), want, backend)


def test_every_backend_gives_what_local_gives(runs: dict[str, Any]) -> None:
    for backend, r in runs.items():
        assert_identical(dict(r.outputs), dict(runs["local"].outputs), f"{backend} vs local")


@pytest.mark.parametrize("backend", BACKENDS)
def test_typed_dicts_keep_ints_and_key_order_everywhere(backend: str, tmp_path: Any) -> None:
    """dict[str, T] as a parameter, between steps, nested in a list and as a pipeline output."""
    r = il.run(vp.typed_values, backend=backend, workdir=tmp_path)
    assert str(r.status) == "succeeded", r.error
    weights = {"zeta": 3, "alpha": 1, "mid": 2}
    assert_identical(dict(r.outputs), {
        "o0": {**weights, "scaled": 8},
        "o1": repr(vp.shape({**weights, "scaled": 8})),
        "o2": [{"b": 1, "a": None}, {"z": 2}],
        "o3": repr(vp.shape(weights)),
    }, backend)


def test_kfp_declares_typed_dicts_as_json_text(tmp_path: Any) -> None:
    pytest.importorskip("kfp")
    import yaml

    path = il.compile(vp.typed_values, backend="kfp", out=tmp_path / "t.yaml")[0]
    ir = next(iter(yaml.safe_load_all(open(path).read())))
    assert ir["root"]["inputDefinitions"]["parameters"]["weights"]["parameterType"] == "STRING"
    assert ast.literal_eval(repr(ir["root"]["inputDefinitions"]["parameters"]["weights"]["defaultValue"])) == (
        '{"zeta": 3, "alpha": 1, "mid": 2}')
