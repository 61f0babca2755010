"""benchmarks/gpu_train.py on a machine without a GPU: says so and exits 0 (CI and laptops)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_without_a_gpu_it_says_so_and_exits_zero() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: run the benchmark itself")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_train.py"), "--steps", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no GPU:")
