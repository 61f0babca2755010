"""flyte2 tests: an isolated HOME (the SDK's defaults live in ~/.flyte).

``tests/flyte2_backend`` is on pytest's pythonpath (pyproject.toml), so ``flyte2_pipelines`` imports by
the same name in this process and in a ``flyte run`` subprocess, as a team's package would in an image.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home
