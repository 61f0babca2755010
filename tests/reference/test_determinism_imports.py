"""Deterministic training without torch's compiler import (issue 12: start-up costs).

``torch.use_deterministic_algorithms`` imports ``torch._inductor`` (~2 s a process); the
reference pipelines set the same switches through
``interlock.plugins.pytorch.determinism.deterministic_algorithms``. Each check runs in a
fresh interpreter, since an earlier test may have loaded inductor already.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_fraud_training_is_deterministic_without_loading_inductor() -> None:
    out = run("""
        import sys, torch
        from reference_pipelines.fraud_model import deterministic
        with deterministic(7):
            inside = (torch.are_deterministic_algorithms_enabled(),
                      torch.is_deterministic_algorithms_warn_only_enabled())
            loaded = any(m.startswith("torch._inductor") for m in sys.modules)
        after = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
        print(inside, loaded, after)
    """)
    assert out == "(True, True) False (False, False)"


def test_inductor_loaded_later_sees_the_flag() -> None:
    # torch.compile after the switch: inductor's own deterministic mode is on, as with the torch call.
    out = run("""
        import torch
        from interlock.plugins.pytorch.determinism import deterministic_algorithms
        deterministic_algorithms(True)
        import torch._inductor.config as cfg
        print(torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              cfg.deterministic)
    """)
    assert out == "True False True"


def test_inductor_loaded_first_is_switched_too() -> None:
    out = run("""
        import torch
        import torch._inductor.config as cfg
        from interlock.plugins.pytorch.determinism import deterministic_algorithms
        deterministic_algorithms(True, warn_only=True)
        first = cfg.deterministic
        deterministic_algorithms(False)
        print(first, cfg.deterministic, torch.are_deterministic_algorithms_enabled())
    """)
    assert out == "True False False"
