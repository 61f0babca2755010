"""The README's "A pipeline" example, saved as a file, works both ways a person would run it:
`python fraud_mini.py` (runs, prints, compiles for KFP) and `interlock run fraud_mini.py`
(runs it once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from doc_blocks import first_block_after

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    return first_block_after("README.md", "## A pipeline")


def test_the_readme_example_runs_as_a_file(tmp_path: Path) -> None:
    script = tmp_path / "fraud_mini.py"
    script.write_text(readme_example())
    env = {**os.environ, "HOME": str(tmp_path)}
    direct = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert direct.returncode == 0, direct.stderr
    assert "succeeded {'o0': 'no champion yet; challenger auc=0.9100'}" in direct.stdout
    assert "fraud_mini:" in (tmp_path / "build" / "fraud_mini.yaml").read_text()
    cli = subprocess.run([sys.executable, "-m", "interlock.core.cli.main", "run", "fraud_mini.py", "-p", "snapshot=2026-12-01"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "fraud-mini: succeeded" in cli.stdout
    assert len(list((tmp_path / ".interlock" / "runs").iterdir())) == 2  # one run each, not three
