"""Setup for the core tests.

The pipelines these tests run live in the package ``core_pipelines`` next to this file, so
that step references ("core_pipelines.basic:double") resolve the same way in-process, in
the CLI and in subprocesses, as a team's pipeline package does in a container.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.core.run import live
from interlock.core.run.live_line import StepLine


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads a developer's settings or writes outside its tmp_path."""
    for var in ("INTERLOCK_BACKEND", "INTERLOCK_PRICES", "INTERLOCK_GIT_SHA", "INTERLOCK_GIT_DIRTY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("INTERLOCK_WORKDIR", str(tmp_path / "default-workdir"))


@pytest.fixture
def lines() -> Iterator[list[StepLine]]:
    """Every line the live capture publishes while the test runs (test_live*.py)."""
    got: list[StepLine] = []
    remove = live.add_sink(got.append)
    yield got
    remove()
