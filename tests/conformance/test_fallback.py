"""``il.attempt()`` and its fallback block (issue 31 item 6, Flyte 2's ``try: r = await strict(x)
except Exception: r = await tolerant(x)``): the same statuses, outputs and handed RunStatus on
every backend that runs it; the failed step still shows failed and the run goes on; refused at
build time, with what to write instead, where a failed task fails the run (Flyte, KFP, Argo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from backends import runnable_backends

import interlock as il
from conformance import fallback_pipelines as fb
from interlock.core.backend.protocol import features_used
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec

FALLBACKS = runnable_backends("fallback")


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[Any, ...]:
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, **params)
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, dict(r.outputs)


@pytest.mark.parametrize("mode", ["ok", "fail", "both"])
def test_the_fallback_runs_only_if_the_attempt_failed_on_every_backend(tmp_path: Path, mode: str) -> None:
    assert {"local", "flyte2-local", "airflow-local"} <= set(FALLBACKS)
    results = {b: _run(fb.with_fallback, b, tmp_path, mode=mode) for b in FALLBACKS}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    status, steps, outputs = results["local"]
    assert steps["load"] == "succeeded"
    if mode == "ok":  # nothing to fall back from
        assert status == "succeeded" and outputs == {"o0": "got 21"}
        assert steps["strict"] == steps["refine"] == "succeeded" and steps["tolerant"] == "skipped"
    elif mode == "fail":  # handled: the failed step shows failed, the rest of its block does not run
        assert status == "succeeded" and steps["strict"] == "failed" and steps["refine"] == "not-run"
        assert steps["tolerant"] == steps["report"] == "succeeded"
        assert outputs == {"o0": "got -101"}  # the fallback saw one failed step and a FATAL error
    else:  # the fallback failed too: that failure is the run's
        assert status == "failed" and steps["tolerant"] == "failed" and steps["report"] == "not-run"


def test_a_handled_failure_is_in_the_receipt(tmp_path: Path) -> None:
    import json

    r = il.run(fb.with_fallback, backend="local", workdir=tmp_path, mode="fail")
    receipt = json.loads(Path(r.receipt_path).read_text())
    assert receipt["status"] == "succeeded"
    assert {s["node"]: s["status"] for s in receipt["steps"]}["strict"] == "failed"


@pytest.mark.parametrize("backend", ["flyte", "kfp", "argo"])
def test_backends_where_a_failed_task_fails_the_run_refuse_it_at_build(tmp_path: Path, backend: str) -> None:
    pytest.importorskip({"flyte": "flytekit", "kfp": "kfp", "argo": "hera"}[backend])
    with pytest.raises(CapabilityError, match="cannot express 'fallback'") as info:
        il.compile(fb.with_fallback, backend=backend, out=tmp_path / "x", image="registry.example/team:1")
    assert "flyte2, airflow or local" in (info.value.hint or "")


def test_the_attempt_survives_the_spec_json() -> None:
    spec = il.spec(fb.with_fallback)
    assert PipelineSpec.loads(spec.dumps()).attempts == spec.attempts
    [a] = spec.attempts
    assert (a.members, a.fallback) == (("strict", "refine"), ("tolerant",))
    assert features_used(spec)["fallback"] == ["attempt-1"] and "join.run_if" not in features_used(spec)


def _refused(body: Any, match: str) -> PipelineDefinitionError:
    with pytest.raises(PipelineDefinitionError, match=match) as info:
        il.spec(il.pipeline(name="fb-misuse")(body))
    return info.value


def test_misuse_is_refused_at_build_with_the_form_to_write() -> None:
    def no_fallback(x: int = 1):
        with il.attempt():
            fb.strict(x=x, mode="ok")

    assert "tried.fallback()" in (_refused(no_fallback, "without a fallback").hint or "")

    def direct_read(x: int = 1):
        with il.attempt() as tried:
            a = fb.strict(x=x, mode="ok")
        with tried.fallback():
            fb.tolerant(x=x, why=tried.failure, mode="ok")
        return fb.report(v=a)

    err = _refused(direct_read, "may not exist")
    assert err.step == "report" and "il.branch_value" in (err.hint or "")

    def in_when(x: int = 1):
        with il.when(fb.load(x=x) > 1), il.attempt():
            fb.strict(x=x, mode="ok")

    _refused(in_when, "top level")

    def late(x: int = 1):
        with il.attempt() as tried:
            fb.strict(x=x, mode="ok")
        fb.load(x=x)
        with tried.fallback():
            fb.tolerant(x=x, why=tried.failure, mode="ok")

    _refused(late, "right after")

    def tried(x: int = 1):
        with il.attempt() as t:
            a = fb.strict(x=x, mode="ok")
        with t.fallback():
            b = fb.tolerant(x=x, why=t.failure, mode="ok")
        return il.branch_value(a, b)

    with pytest.raises(PipelineDefinitionError, match="failure_policy='continue'") as info:
        il.spec(il.pipeline(name="fb-continue", failure_policy="continue")(tried))
    assert "stop" in (info.value.hint or "")


def test_flyte2_marks_the_attempt_and_its_fallback_in_the_driver() -> None:
    pytest.importorskip("flyte")
    from interlock.adapters.flyte2.render import render

    lines = [line.strip() for line in render(il.spec(fb.with_fallback), store="/tmp/store").splitlines()]
    tried = lines.index("# try: il.attempt() attempt-1 (a failure here is handled by its fallback)")
    backup = lines.index("# except: the fallback of attempt-1 (runs only if it failed)")
    assert lines[tried + 1] == "await d.step('strict', step_strict)"
    assert lines[backup + 1] == "await d.step('tolerant', step_tolerant)" and tried < backup
