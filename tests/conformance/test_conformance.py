"""Every backend runs the same pipelines and must reach the same outcomes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from backends import backend_params, runnable_backends

import interlock as il
from conformance.pipelines import CASES, STATUSES_AGAIN, STATUSES_FIRST, Case, statuses


@pytest.fixture(params=backend_params())
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_same_outcome_on_every_backend(backend: str, case_name: str, tmp_path: Path) -> None:
    case: Case = CASES[case_name]
    params = dict(case.params)
    if case.needs_marker_dir:
        params["marker_dir"] = str(tmp_path / "markers")
    result = il.run(case.pipeline, backend=backend, workdir=tmp_path / "work", raise_on_failure=False, **params)

    assert result.status == case.status, result.error
    for name, expected in case.outputs.items():
        got = result.outputs[name]
        if dataclasses.is_dataclass(expected):
            assert dataclasses.asdict(got) == dataclasses.asdict(expected)
        else:
            assert got == expected, f"output {name}"
    for node, status in case.steps.items():
        assert result.steps[node].status == status, f"step {node}"
    for node, attempts in case.attempts.items():
        assert result.steps[node].attempts == attempts, f"attempts of {node}"
    if case.failure_kind:
        assert isinstance(result.error, il.StepFailed)
        assert result.error.kind == case.failure_kind
        assert result.error.step == case.failed_step
        assert result.steps[case.failed_step].failure["kind"] == case.failure_kind
        downstream = [n for n, o in result.steps.items() if n != case.failed_step]
        assert all(result.steps[n].status not in ("succeeded", "cached") for n in downstream)
    assert result.receipt_path is not None and Path(result.receipt_path).exists()


def test_failed_run_raises_step_failed_with_receipt(backend: str, tmp_path: Path) -> None:
    with pytest.raises(il.StepFailed) as info:
        il.run(CASES["fatal"].pipeline, backend=backend, workdir=tmp_path, x=1)
    err = info.value
    assert err.step == "broken" and err.kind == "FATAL"
    assert "illegal memory access" in err.reason
    assert err.hint  # the classifier says what to do
    assert err.receipt_path and Path(err.receipt_path).exists()


def test_the_local_backends_agree_on_every_status(tmp_path: Path) -> None:
    """One pipeline with a cached step, a closed gate, a failed step and a step after it:
    local, flyte-local and kfp-local report the same status for every node, twice."""
    installed = runnable_backends()
    seen: dict[str, list[dict[str, str]]] = {}
    for backend in installed:
        work = tmp_path / backend
        runs = [il.run(statuses, backend=backend, workdir=work, raise_on_failure=False) for _ in range(2)]
        for r in runs:
            assert r.status == "failed"
            assert isinstance(r.error, il.StepFailed), r.error
            assert (r.error.step, r.error.kind) == ("explode", "FATAL")
            assert r.steps["explode"].attempts == 1 and r.steps["explode"].failure["kind"] == "FATAL"
            assert json.loads(Path(r.receipt_path).read_text())["steps"][0]["status"] == r.steps["load_value"].status
        seen[backend] = [{n: str(o.status) for n, o in r.steps.items()} for r in runs]
        assert seen[backend] == [STATUSES_FIRST, STATUSES_AGAIN], backend
        assert runs[1].steps["load_value"].cached and runs[1].steps["load_value"].attempts == 0
    assert len({json.dumps(v, sort_keys=True) for v in seen.values()}) == 1, seen
