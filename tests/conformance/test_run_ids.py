"""A run id names one run of one pipeline in one work directory, on every backend, through
`interlock run`: pipeline B given pipeline A's run id in A's work directory is refused (A's
receipt and parameters stay A's), and the same ``--run-id`` in two work directories, both
tracked in one MLflow store, are two MLflow runs, each with its own parameters and receipt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from backends import runnable_backends

from conformance.run_id_pipelines import EXPERIMENT

MODULE = "conformance.run_id_pipelines"


def _run(cwd: Path, backend: str, pipeline: str, workdir: Path, store: Path, *params: str) -> subprocess.CompletedProcess[str]:
    args = [f"store={store}", *params]
    return subprocess.run(
        [sys.executable, "-m", "interlock.core.cli.main", "run", f"{MODULE}:{pipeline}", "--backend", backend,
         "--workdir", str(workdir), "--run-id", "r1", *(a for p in args for a in ("-p", p))],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )


@pytest.mark.parametrize("backend", runnable_backends())
def test_another_pipeline_cannot_take_over_a_run_id(tmp_path: Path, backend: str) -> None:
    work, store = tmp_path / "wd", tmp_path / "mlflow"
    first = _run(tmp_path, backend, "pipeline_a", work, store, "x=21")
    assert first.returncode == 0, first.stderr
    state = work / "runs" / "r1" / "state"
    receipt, params = (state / "receipt.json").read_bytes(), (state / "params.json").read_bytes()

    other = _run(tmp_path, backend, "pipeline_b", work, store)
    assert other.returncode == 2, other.stdout + other.stderr
    assert f"interlock: error [RUN_ID]: run r1 in {work} is a run of pipeline 'pipeline-a', not 'pipeline-b'" in other.stderr
    assert "leave --run-id out (or pick another) for a new run of pipeline-b" in other.stderr
    assert "resuming" not in other.stderr
    assert (state / "receipt.json").read_bytes() == receipt and (state / "params.json").read_bytes() == params

    again = _run(tmp_path, backend, "pipeline_a", work, store)  # the same pipeline: a resume, as before
    assert again.returncode == 0 and "resuming" in again.stderr, again.stderr


@pytest.mark.parametrize("backend", runnable_backends())
def test_one_run_id_in_two_workdirs_is_two_mlflow_runs(tmp_path: Path, backend: str) -> None:
    store = tmp_path / "mlflow"
    for name, x in (("wd1", "1"), ("wd2", "2")):
        proc = _run(tmp_path, backend, "pipeline_a", tmp_path / name, store, f"x={x}")
        assert proc.returncode == 0, proc.stderr
    probe = subprocess.run([sys.executable, "-m", "conformance.mlflow_probe", str(store), EXPERIMENT],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    runs = json.loads(probe.stdout)
    assert len(runs) == 2
    assert sorted(r["params"]["x"] for r in runs) == ["1", "2"]
    for run in runs:
        assert run["receipt"]["parameters"]["x"] == int(run["params"]["x"])
        assert run["children"] == ["attach", "double"]
        assert run["tags"]["interlock.output.o0"] == run["run_id"]  # the step found its own run
