"""benchmarks/flyte2_overhead.py runs at small sizes, --floor included, and writes its rows
(the figures themselves come from the full sizes, on a quiet machine)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_and_its_bare_shim_diagnostic_run_and_write_their_rows(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "flyte2_overhead.py"), "--sizes", "3,6", "--repeat", "1",
         "--floor", "--json", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {(r["figure"], r["size"]): r for r in json.loads(out.read_text())}
    for figure in ("first run", "cached rerun", "first run, shim as a bare call"):
        for size in (3, 6):
            row = rows[(f"flyte2-local {figure}", size)]
            assert row["interlock_s"] > 0 and row["native_s"] > 0 and row["ratio"] > 0, row
        assert (f"flyte2-local {figure} slope", 3) in rows
    assert not list(tmp_path.glob("flyte2-bench-*")), "the benchmark's runs go with its temporary folder"


def test_the_bare_shim_is_put_back_after_the_diagnostic_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other rows of a round time the real shim, so --floor's swap ends with its block."""
    import interlock.adapters.flyte2.task as step_task

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("flyte2_overhead")
    shim = step_task.execute_step
    with pytest.raises(RuntimeError), bench.bare_shim():
        assert step_task.execute_step is not shim
        raise RuntimeError("a failed run inside the block")
    assert step_task.execute_step is shim
