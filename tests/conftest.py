"""Suite-wide test setup.

The tests' own importable modules (test pipelines, helpers) are found through pytest's
``pythonpath`` setting in pyproject.toml, never by editing sys.path here. Subprocesses that
import a test pipeline by module name (kfp-local's tasks, ``pyflyte-execute``, the Airflow
driver), the way a container imports a team's pipeline package, get the same list through
PYTHONPATH, except the repository root: on a child's PYTHONPATH the root's
``interlock.egg-info`` would pass for an installed interlock (pip then skips installing
one), and kfp-local hands its tasks this process's sys.path anyway.
"""

from __future__ import annotations

import os

import pytest

# No phoning home from the libraries under test (MLflow 3 telemetry writes under ~/.config too).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")


def pytest_configure(config: pytest.Config) -> None:
    ours = [str(p) for p in config.getini("pythonpath") if p != config.rootpath]
    theirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in ours]
    os.environ["PYTHONPATH"] = os.pathsep.join([*ours, *theirs])
