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


# Pasted into both runners: the interlock side binds every public name of the package before
# the clock, as ``import flytekit`` / ``from kfp import dsl`` load theirs (``interlock``
# resolves its names lazily, on first use, which would otherwise happen inside the clock).
IMPORT_INTERLOCK = "import interlock as il\nfor _name in il.__all__:\n    getattr(il, _name)\n"
