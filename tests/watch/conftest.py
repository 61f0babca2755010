"""Setup for the watch tests: an isolated environment and a fake clock that a watcher's
sleep advances (a simulated day takes milliseconds, never a real sleep)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("INTERLOCK_BACKEND", "INTERLOCK_PRICES", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("INTERLOCK_WORKDIR", str(tmp_path / "default-workdir"))
    monkeypatch.setenv("INTERLOCK_GIT_SHA", "0123456789abcdef0123456789abcdef01234567")


@dataclass
class FakeClock:
    now: datetime
    slept: float = 0.0

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.now += timedelta(seconds=seconds)

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
