"""flyte-local builds a pipeline's flytekit entities once per process (issue 12).

A flytekit user's module-level ``@workflow`` is built and compiled once and then executed as
often as they like; a rerun of the same interlock pipeline must not rebuild a task per step
and recompile the workflow every time either. Reuse must not change what a run does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from flyte_pipelines.basic import demo

import interlock as il
from interlock.adapters.flyte import local


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = local.build_entities

    def counting(spec, options=None):  # noqa: ANN001, ANN202 - a pass-through
        seen.append(spec.name)
        return real(spec, options)

    monkeypatch.setattr(local, "build_entities", counting)
    return seen


def test_a_rerun_of_the_same_spec_builds_nothing(tmp_path: Path, builds: list[str]) -> None:
    spec = dataclasses.replace(demo.spec)  # a spec object no other test has run
    first = il.run(spec, backend="flyte-local", workdir=tmp_path / "w", snapshot="r1")
    second = il.run(spec, backend="flyte-local", workdir=tmp_path / "w", snapshot="r1")
    other = il.run(spec, backend="flyte-local", workdir=tmp_path / "w2", snapshot="r2", cache=False)
    assert builds == [spec.name, spec.name]  # once cached, once uncached (another task shape)
    assert second.outputs["o0"] == first.outputs["o0"]
    assert {s.status for s in second.steps.values()} >= {"cached"}
    assert {s.status for s in other.steps.values()} == {"succeeded"}


def test_an_equal_but_new_spec_is_built_again(tmp_path: Path, builds: list[str]) -> None:
    a, b = dataclasses.replace(demo.spec), dataclasses.replace(demo.spec)
    il.run(a, backend="flyte-local", workdir=tmp_path / "w", snapshot="r3")
    il.run(b, backend="flyte-local", workdir=tmp_path / "w", snapshot="r3")
    assert len(builds) == 2
