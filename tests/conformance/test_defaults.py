"""An int default of a float parameter or input is a float, on every backend and compiler
(issue 24, item 4): flytekit refused ``a: float = 1`` at run and at compile."""

from __future__ import annotations

from pathlib import Path

import pytest
from backends import runnable_backends

import interlock as il
from conformance import default_pipelines as dp


@pytest.mark.parametrize("backend", runnable_backends())
def test_an_int_default_of_a_float_is_a_float_everywhere(tmp_path: Path, backend: str) -> None:
    result = il.run(dp.int_defaults, backend=backend, workdir=tmp_path)
    assert result.succeeded, result.error
    assert result.outputs == {"o0": 2.0, "o1": 3.0}
    assert all(type(v) is float for v in result.outputs.values())


def test_the_spec_holds_the_defaults_as_floats() -> None:
    spec = il.spec(dp.int_defaults)
    assert [(p.name, p.default) for p in spec.params] == [("a", 1.0), ("weights", [1.0, 2.0])]
    assert type(spec.param("a").default) is float  # type: ignore[union-attr]
    [factor] = [p for p in spec.step_of("scale").inputs if p.name == "factor"]
    assert type(factor.default) is float


@pytest.mark.parametrize("backend", ["flyte", "kfp"])
def test_an_int_default_of_a_float_compiles(tmp_path: Path, backend: str) -> None:
    pytest.importorskip("flytekit" if backend == "flyte" else "kfp")
    assert il.compile(dp.int_defaults, backend=backend, out=tmp_path / "out", image="registry.example/team:1")
