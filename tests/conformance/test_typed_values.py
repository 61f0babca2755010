"""Enum, Literal and pydantic model parameters and values on every backend: the same outputs,
each step gets the declared type (an Enum member, a model instance), a value outside a Literal
or Enum is refused before any step runs, naming the parameter and the values allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from backends import runnable_backends

import interlock as il
from conformance import typed_pipelines as tp
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec

BACKENDS = runnable_backends()


@pytest.mark.parametrize("backend", BACKENDS)
def test_enum_literal_and_pydantic_parameters_run_alike(backend: str, tmp_path: Path) -> None:
    r = il.run(tp.typed_params, backend, workdir=tmp_path, progress=False)
    assert r.outputs == {"o0": "red:fast:5:0.2:m"}
    r = il.run(tp.typed_params, backend, workdir=tmp_path / "b", progress=False, color="blue", size=1, mode="slow",
               cfg={"lr": 0.5, "layers": 1, "name": "x"})
    assert r.outputs == {"o0": "blue:slow:2:1.0:x"}
    r = il.run(tp.typed_params, backend, workdir=tmp_path / "c", progress=False, color=tp.Color.BLUE,
               cfg=tp.Cfg(layers=7))
    assert r.outputs == {"o0": "blue:fast:10:0.2:m"}


@pytest.mark.parametrize(("param", "value", "allowed"), [
    ("mode", "medium", "Literal['fast', 'slow']"), ("color", "green", "Color"), ("size", 2, "Size"),
])
def test_a_value_outside_a_literal_or_enum_is_refused_before_any_step(param: str, value: object, allowed: str,
                                                                     tmp_path: Path) -> None:
    with pytest.raises(PipelineDefinitionError, match=param) as err:
        il.run(tp.typed_params, "local", workdir=tmp_path, progress=False, **{param: value})
    assert allowed in str(err.value) and repr(value) in str(err.value)
    assert not list(tmp_path.glob("runs/*/state/fragments/*"))


def test_the_types_survive_the_spec_round_trip_and_describe_themselves() -> None:
    spec = tp.typed_params.spec
    assert PipelineSpec.from_json(spec.to_json()) == spec
    types = {p.name: p.type for p in spec.params}
    assert types["mode"].describe() == "Literal['fast', 'slow']" and types["mode"].choices == ("fast", "slow")
    assert types["color"].describe() == "Color" and types["color"].choices == ("red", "blue")
    assert types["size"].choices == (1, 3) and types["cfg"].describe() == "Cfg"
    assert [n for n, _ in types["cfg"].fields] == ["lr", "layers", "name"]


def test_wiring_checks_the_values_a_literal_allows() -> None:
    @il.step
    def pick() -> Literal["fast", "slow", "off"]:
        return "off"

    @il.step
    def go(mode: tp.Mode) -> str:
        return mode

    @il.pipeline(name="narrower")
    def narrower() -> str:
        return go(mode=pick())

    with pytest.raises(PipelineDefinitionError, match="type mismatch"):
        _ = narrower.spec

    @il.step
    def as_text(text: str) -> str:
        return text

    @il.pipeline(name="widening")
    def widening() -> str:
        return as_text(text=tp.paint(color=tp.Color.RED, size=tp.Size.S, mode="fast", cfg=tp.Cfg()))

    assert widening.spec.nodes  # an Enum feeds a plain str port
