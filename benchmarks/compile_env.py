"""What the compile benchmarks' child interpreters share, so that both sides start alike.

Bytecode: this machine's shell sets PYTHONDONTWRITEBYTECODE, so a module that is imported
inside the timed region would be compiled from source on every run, while flytekit and kfp
load from the .pyc files pip wrote for them. The children cache bytecode under one prefix in
the benchmark's temporary folder (nothing is written next to the sources), and a warm-up
run per side fills it before anything is timed, as an installed package would have it. The
generated pipeline module is new in every run, so it is compiled from source on both sides.

``in_clock`` (the modules a run imported inside its timed region, the pipeline module
aside) goes into each row's note, so that an import left in the clock on one side shows.
"""

from __future__ import annotations

import os
from pathlib import Path


def child_env(tmp: Path, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    return env | {"PYTHONPATH": str(work), "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}


# Pasted into both runners (``{adapter}``: flyte or kfp), run on both sides: interlock's
# public names bound, and every module of interlock.core and of the adapter under test
# imported, before the clock, as ``import flytekit`` / ``from kfp import dsl`` load theirs.
# interlock loads modules on first use (``import interlock`` stays light), which would
# otherwise happen inside the clock on its side only.
IMPORT_INTERLOCK = """\
import importlib, pkgutil
import interlock as il
import interlock.adapters.{adapter}, interlock.core
for _name in il.__all__:
    getattr(il, _name)
for _pkg in (interlock.core, interlock.adapters.{adapter}):
    for _mod in pkgutil.walk_packages(_pkg.__path__, _pkg.__name__ + "."):
        importlib.import_module(_mod.name)
"""
