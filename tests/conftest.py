"""Suite-wide test setup.

`tests/` goes on sys.path (and PYTHONPATH, for the subprocesses that kfp-local and
pyflyte-execute start) so that test pipelines are importable by a stable module name, the
way a container imports a team's pipeline package.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if TESTS not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([TESTS, *_paths])

# No phoning home from the libraries under test (MLflow 3 telemetry writes under ~/.config too).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
