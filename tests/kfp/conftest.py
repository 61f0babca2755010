"""The KFP tests' pipelines are a package next to them, importable by module name both here
and in the component subprocesses that kfp-local starts (they inherit sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
