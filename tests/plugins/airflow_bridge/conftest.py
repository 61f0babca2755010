"""Fixtures for the Airflow bridge tests.

Airflow's configuration is process-global, so Airflow itself only ever runs in
subprocesses (``bridge_driver.py`` and the trigger scripts), each pointed at its own
AIRFLOW_HOME and SQLite copy of a database migrated once per session. The pytest process
hosts the fake FlyteAdmin (a real gRPC server on loopback) and never imports Airflow.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# The bridge needs the `airflow` extra (apache-airflow, flytekit); without it, skip this folder.
collect_ignore_glob = (
    ["test_*.py"]
    if any(importlib.util.find_spec(m) is None for m in ("airflow", "flytekit", "grpc"))
    else []
)

from bridge_fake_admin import FakeAdmin, serve  # noqa: E402
from bridge_harness import CLIENT_ID, CLIENT_SECRET, airflow_env  # noqa: E402


@pytest.fixture(scope="session")
def airflow_db_template(tmp_path_factory) -> Path:
    """`airflow db migrate` once per session; each scenario copies the file (migrating is slow)."""
    home = tmp_path_factory.mktemp("airflow-template")
    db = home / "airflow.db"
    env = airflow_env(home, "127.0.0.1:1", db)
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return db


@pytest.fixture(scope="module")
def admin_server():
    admin = FakeAdmin()
    served = serve(admin, client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
    admin.served = served  # the token endpoint and the bearer guard, for the auth tests
    yield admin, served.endpoint
    served.stop()


@pytest.fixture(scope="session")
def make_airflow_home(tmp_path_factory, airflow_db_template):
    """A fresh AIRFLOW_HOME with a copy of the migrated database; returns (home, db)."""

    def make(name: str = "airflow-home") -> tuple[Path, Path]:
        home = tmp_path_factory.mktemp(name)
        db = home / "airflow.db"
        shutil.copyfile(airflow_db_template, db)
        return home, db

    return make
