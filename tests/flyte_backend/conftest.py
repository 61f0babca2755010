"""Flyte adapter tests: importable test pipelines, an isolated HOME, and the backends registered.

``tests/flyte_backend`` is on pytest's pythonpath (pyproject.toml) so ``flyte_pipelines`` imports by the same
name here and inside ``pyflyte-execute`` subprocesses (as a team's package would in an image).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Nothing under the real $HOME: flytekit's defaults (~/.flyte) would land in this one."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _register_backends() -> None:
    """Register the backends in-process too, in case the entry points are not installed yet."""
    from interlock.adapters.flyte.backend import FlyteBackend, FlyteLocalBackend
    from interlock.core.backend.protocol import register_backend

    register_backend("flyte", FlyteBackend)
    register_backend("flyte-local", FlyteLocalBackend)


_register_backends()
