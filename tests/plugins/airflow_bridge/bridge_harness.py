"""Helpers shared by the Airflow bridge tests: subprocess environments and the DAG driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DAGS = HERE / "dags"
CLIENT_ID = "airflow-bridge"
CLIENT_SECRET = "s3cr3t-client-value-never-logged"
# A fixed, valid Fernet key (Airflow encrypts trigger kwargs and connection extras with it).
FERNET_KEY = "tbi-yFmtSBi02kd1L7nvIPg73HyH1HAA5KCBEofsl9s="


def airflow_env(home: Path, endpoint: str, db: Path) -> dict[str, str]:
    """An environment for one Airflow subprocess: everything under ``home``, nothing in $HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "FLYTE"))}
    host, port = endpoint.rsplit(":", 1)
    conn = {
        "conn_type": "interlock_flyte",
        "host": host,
        "port": int(port),
        "extra": {"insecure": True, "project": "ml", "domain": "development"},
        # The fake FlyteAdmin requires OAuth2 client credentials, as a production one does.
        "login": CLIENT_ID,
        "password": CLIENT_SECRET,
    }
    env.update(
        HOME=str(home),
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        # A deployment that defers by default: operators and sensors without deferrable=...
        # follow it (il_modes.py says deferrable=False where it tests waiting in the worker).
        AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE="True",
        AIRFLOW__CORE__FERNET_KEY=FERNET_KEY,
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW__LOGGING__BASE_LOG_FOLDER=str(home / "logs"),
        AIRFLOW__SCHEDULER__STANDALONE_DAG_PROCESSOR="False",
        AIRFLOW_CONN_FLYTE_DEFAULT=json.dumps(conn),
        PYTHONUNBUFFERED="1",
    )
    return env


def run_driver(
    env: dict[str, str],
    out: Path,
    dag_ids: list[str],
    timeout: float = 300,
    while_running: Callable[[subprocess.Popen], None] | None = None,
) -> tuple[dict, str]:
    """Run ``bridge_driver.py``; ``while_running(proc)`` runs in a thread meanwhile (to signal it)."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "bridge_driver.py"), str(out), *dag_ids],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watcher = (
        threading.Thread(target=while_running, args=(proc,), daemon=True) if while_running else None
    )
    if watcher:
        watcher.start()
    try:
        logs, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if watcher:
        watcher.join(timeout=5)
    out.with_suffix(".log").write_text(logs)  # kept for a failing test's post-mortem
    assert proc.returncode == 0, logs[-5000:]
    return json.loads(out.read_text()), logs
