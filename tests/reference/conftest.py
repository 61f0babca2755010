"""The reference pipelines live at the repository root (a team's repo layout, not part of the
installed package): put the root on sys.path, and on PYTHONPATH for the step subprocesses
that kfp-local starts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if ROOT not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *_paths])
