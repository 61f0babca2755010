"""Values are identical across backends: an untyped dict/list keeps its ints, floats, bools,
None and key order (nested too) on local, flyte-local and kfp-local, both where the next step
receives it and in the pipeline's outputs. kfp-local turned ints into floats and sorted keys
(a protobuf Struct), and flyte-local sorted keys."""

from __future__ import annotations

import ast
from typing import Any

import pytest

import interlock as il
from conformance import value_pipelines as vp
from interlock.core.backends import available_backends

BACKENDS = [b for b in ("local", "flyte-local", "kfp-local") if b in available_backends()]


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
    got = dict(r.outputs)
    if backend == "kfp-local":
        # Typed dict[str, int] stays a KFP STRUCT (listed as lossy): its ints come back by the
        # declared type, its key order is KFP's. Everything untyped above is exact.
        assert _sorted_shape(got["o5"]) == _sorted_shape(want["o5"])
        got["o5"] = want["o5"]
    assert_identical(got, want, backend)


def _sorted_shape(text: str) -> list:
    kind, members = ast.literal_eval(text)
    return [kind, sorted(members)]


def test_every_backend_gives_what_local_gives(runs: dict[str, Any]) -> None:
    for backend, r in runs.items():
        got, want = dict(r.outputs), dict(runs["local"].outputs)
        if backend == "kfp-local":
            assert _sorted_shape(got.pop("o5")) == _sorted_shape(want.pop("o5"))
        assert_identical(got, want, f"{backend} vs local")
