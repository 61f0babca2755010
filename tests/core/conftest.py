"""Setup for the core tests.

The pipelines these tests run live in the package ``core_pipelines`` next to this file, so
that step references ("core_pipelines.basic:double") resolve the same way in-process, in
the CLI and in subprocesses, as a team's pipeline package does in a container.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if HERE not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE, *_paths])


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads a developer's settings or writes outside its tmp_path."""
    for var in ("INTERLOCK_BACKEND", "INTERLOCK_PRICES", "INTERLOCK_GIT_SHA", "INTERLOCK_GIT_DIRTY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("INTERLOCK_WORKDIR", str(tmp_path / "default-workdir"))
