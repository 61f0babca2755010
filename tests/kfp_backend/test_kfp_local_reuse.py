"""kfp-local compiles a pipeline once per process (issue 12): a kfp user's module-level
``@dsl.pipeline`` is compiled once and run as often as they like, and a rerun of the same
interlock pipeline must not generate and compile its components again either."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from kfp_test_pipelines import typed

import interlock as il
from interlock.adapters.kfp import local


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = local.build_pipeline

    def counting(spec, opts=None):  # noqa: ANN001, ANN202 - a pass-through
        seen.append(spec.name)
        return real(spec, opts)

    monkeypatch.setattr(local, "build_pipeline", counting)
    return seen


def test_a_rerun_of_the_same_spec_compiles_nothing(tmp_path: Path, builds: list[str]) -> None:
    spec = dataclasses.replace(il.spec(typed.widen))  # a spec object no other test has run
    first = il.run(spec, backend="kfp-local", workdir=tmp_path / "w", n=4)
    second = il.run(spec, backend="kfp-local", workdir=tmp_path / "w", n=5)  # new inputs: the tasks run again
    assert builds == [spec.name]
    assert first.outputs == {"o0": 2.0, "o1": 2.0, "o2": 2.5}
    assert second.outputs == {"o0": 2.5, "o1": 2.5, "o2": 2.5}
    assert {o.status for o in second.steps.values()} == {"succeeded"}
    il.run(dataclasses.replace(spec), backend="kfp-local", workdir=tmp_path / "w", n=4)  # an equal, new spec
    assert len(builds) == 2
