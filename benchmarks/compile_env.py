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

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


@dataclass(frozen=True)
class Sides:
    """A compile benchmark's two sides run alike: each size and repeat writes the generated
    module for one flavour (``generate(n, flavour)``), runs ``runner`` on it in a fresh
    interpreter (``python runner.py FLAVOUR MODULE OUT *args``) and reads the JSON object the
    runner prints last. The best run by CPU seconds counts (steadier than wall time on a
    shared machine)."""

    flavours: tuple[str, str]  # (the native tool, "interlock")
    generate: Callable[[int, str], str]
    runner: str
    args: tuple[str, ...] = ()
    out: str = "{flavour}.yaml"

    def run(self, flavour: str, n: int, work: Path, tmp: Path) -> dict[str, Any]:
        mod = f"bench_{flavour}_{n}"
        (work / f"{mod}.py").write_text(self.generate(n, flavour))
        # A file, not `python -c`: kfp's task setters call inspect.stack(), which scans every
        # loaded module for a frame whose file is no module's ("<string>"); a user's script is a file.
        runner = work / "bench_runner.py"
        runner.write_text(self.runner)
        out = work / self.out.format(flavour=flavour)
        proc = subprocess.run([sys.executable, str(runner), flavour, mod, str(out), *self.args],
                              cwd=work, env=child_env(tmp, work), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{flavour} side failed at {n} steps:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def warm_up(self, tmp: Path) -> None:
        """One untimed run per side: the bytecode of everything either side imports gets cached."""
        for flavour in self.flavours:
            work = tmp / f"{flavour}-warm-up"
            work.mkdir()
            self.run(flavour, 2, work, tmp)

    def best(self, n: int, repeat: int, tmp: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """(interlock's best run, the native tool's) at ``n`` steps."""
        best: dict[str, dict[str, Any]] = {}
        for r in range(repeat):
            for flavour in self.flavours:
                work = tmp / f"{flavour}-{n}-{r}"
                work.mkdir()
                res = self.run(flavour, n, work, tmp)
                if flavour not in best or res["cpu"] < best[flavour]["cpu"]:
                    best[flavour] = res
        return best["interlock"], best[self.flavours[0]]


def note(repeat: int, ours: dict[str, Any], theirs: dict[str, Any], size: str) -> str:
    """A row's note: what counts, the wall times, the output sizes, the imports in the clock."""
    return (f"CPU s, best of {repeat}; wall {ours['seconds']:.2f} vs {theirs['seconds']:.2f} s; {size}; "
            f"modules imported in the clock {len(ours['in_clock'])} vs {len(theirs['in_clock'])}")
