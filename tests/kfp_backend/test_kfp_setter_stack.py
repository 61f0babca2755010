"""KFP compile and kfp-local build a pipeline with kfp's setters naming themselves without
reading source (adapters/kfp/setter_stack.py): ``inspect.stack()`` in kfp's ``_ensure_container_spec_exists``
read every frame's source, and its first call in a process scanned every loaded module
(about 40 ms with kfp and interlock loaded)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from kfp_test_pipelines import typed

import interlock as il
from interlock.adapters.kfp import local
from interlock.adapters.kfp.compile import build_pipeline, compile_pipeline
from interlock.adapters.kfp.policies import KfpOptions
from interlock.adapters.kfp.setter_stack import _PROXY, setters_without_source

OPTS = KfpOptions.from_options(local_conditions=True)


def test_kfp_local_builds_without_reading_a_frames_source(monkeypatch: pytest.MonkeyPatch) -> None:
    def with_source(*args: object, **kwargs: object) -> None:
        raise AssertionError("inspect.stack() (every frame's source) called while building the kfp-local pipeline")

    monkeypatch.setattr(inspect, "stack", with_source)
    spec = dataclasses.replace(il.spec(typed.widen))  # a spec object no other test has built
    built = local.built_for(spec, OPTS)
    assert set(built.task_names.values()) == {n.name for n in spec.nodes}


def test_kfp_compile_builds_without_reading_a_frames_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def with_source(*args: object, **kwargs: object) -> None:
        raise AssertionError("inspect.stack() (every frame's source) called while compiling the KFP pipeline")

    monkeypatch.setattr(inspect, "stack", with_source)
    out = compile_pipeline(il.spec(typed.widen), tmp_path / "p.yaml", KfpOptions(pipeline_root="s3://b/root"))
    assert out.read_text()


def test_the_same_pipeline_as_with_kfps_own_inspect() -> None:
    spec = il.spec(typed.widen)
    plain = MessageToDict(build_pipeline(spec, OPTS).pipeline.pipeline_spec)
    with setters_without_source():
        quick = MessageToDict(build_pipeline(spec, OPTS).pipeline.pipeline_spec)
    assert quick == plain


def test_kfp_still_learns_the_setters_name() -> None:
    # kfp reads inspect.stack()[1][3]: the function that called the method calling stack().
    def set_something() -> str:
        return ensure()

    def ensure() -> str:
        return _PROXY.stack()[1][3]

    assert set_something() == "set_something"


def test_kfps_module_gets_its_inspect_back() -> None:
    from kfp.dsl import pipeline_task

    with setters_without_source():
        assert pipeline_task.inspect is _PROXY
        with setters_without_source():  # nested: left as it is
            assert pipeline_task.inspect is _PROXY
        assert pipeline_task.inspect is _PROXY
    assert pipeline_task.inspect is inspect
