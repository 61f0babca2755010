"""The README's pipeline example runs as written (docs show runnable examples)."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_pipeline_example_runs_and_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("kfp")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if "il.compile(" in b)
    script = tmp_path / "readme_example.py"
    script.write_text(example)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("INTERLOCK_WORKDIR", str(tmp_path / ".interlock"))
    runpy.run_path(str(script), run_name="readme_example")
    sys.modules.pop("readme_example", None)
    receipts = list((tmp_path / ".interlock").rglob("receipt.json"))
    assert len(receipts) == 1
    compiled = (tmp_path / "build" / "fraud_mini.yaml").read_text()
    assert "fraud-mini" in compiled and "pipelineInfo" in compiled
