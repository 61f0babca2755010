"""Retries by cause in the deployment form (``interlock compile --backend airflow``): a
CONTENTION failure is retried by Airflow after the step's backoff (its ``retry_policy``), a
FATAL one never, though the task allows retries. Run for real with ``dag.test()`` in a fresh
interpreter, the run state under the compiled ``state_root``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("airflow")

import interlock as il  # noqa: E402
from interlock.core.run.env import state_dir_of  # noqa: E402
from interlock.core.run.state import RunState  # noqa: E402

HERE = Path(__file__).resolve().parent


def run_deployed(pipeline, tmp_path: Path, counter: Path | None, operator: str = "taskflow",
                 conf: dict | None = None) -> tuple[dict, Path]:
    """Compile ``pipeline`` for a deployment and run it with dag.test(); ``conf``: the run's
    parameters (default: the counter file these tests' pipelines take)."""
    from interlock.adapters.airflow.local import template_db

    dags, root = tmp_path / "dags", tmp_path / "state-root"
    (dag_file, _) = il.compile(pipeline, backend="airflow", out=dags, operator=operator, state_root=str(root))
    db = tmp_path / "airflow.db"
    shutil.copyfile(template_db(tmp_path / "cache"), db)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "INTERLOCK_"))}
    env.update(AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__CORE__DAGS_FOLDER=str(dags),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}", AIRFLOW__CORE__LOAD_EXAMPLES="False")
    out = tmp_path / "out.json"
    name = il.spec(pipeline).name
    proc = subprocess.run([sys.executable, str(HERE / "run_dag.py"), str(dag_file), name,
                           json.dumps(conf if conf is not None else {"counter": str(counter)}), str(out)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (run,) = (root / "runs").iterdir()
    return json.loads(out.read_text()), run


def test_contention_is_retried_by_airflow_after_the_backoff(tmp_path: Path) -> None:
    from airflow_test_pipelines import contended

    counter = tmp_path / "tries"
    result, run_dir = run_deployed(contended, tmp_path, counter)
    task = result["tasks"]["wait_for_gpus"]
    assert result["state"] == "success"
    assert task == {"state": "success", "try_number": 2}  # Airflow's second try, not the shim's loop
    assert counter.read_text() == "2" and result["seconds"] >= 1.0  # waited the step's first delay
    frag = RunState(state_dir_of(run_dir), run_dir.name).read_fragment("wait_for_gpus")
    assert frag is not None and str(frag.status) == "succeeded"
    assert [a.failure["kind"] if a.failure else None for a in frag.attempts] == ["CONTENTION", None]


def test_a_fatal_failure_is_not_retried_although_the_task_allows_retries(tmp_path: Path) -> None:
    from airflow_test_pipelines import fatal

    counter = tmp_path / "tries"
    result, run_dir = run_deployed(fatal, tmp_path, counter)
    assert result["state"] == "failed"
    assert result["tasks"]["bad_config"] == {"state": "failed", "try_number": 1}
    assert counter.read_text() == "1"
    frag = RunState(state_dir_of(run_dir), run_dir.name).read_fragment("bad_config")
    assert frag is not None and frag.attempts[-1].failure["kind"] == "FATAL"


def test_retry_settings_reach_the_compiled_tasks(tmp_path: Path) -> None:
    from airflow_test_pipelines import contended
    from test_airflow_dags import parse

    il.compile(contended, backend="airflow", out=tmp_path / "dags", operator="taskflow")
    task = parse(tmp_path / "dags", tmp_path)["dags"]["af-contended"]["tasks"]["wait_for_gpus"]
    assert task["retries"] == 2
    assert task["retry"] == {"retry_delay": 1.0, "max_retry_delay": 2.0, "retry_exponential_backoff": 2.0,
                             "retry_policy": "ShimRetryPolicy"}
    local = il.compile(contended, backend="airflow-local", out=tmp_path / "local", operator="taskflow", retries="shim")
    assert json.loads(local[1].read_text())["options"]["retries"] == "shim"
