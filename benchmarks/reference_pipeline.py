"""Wall time of the README's main command, and of a rerun served from cache.

    python benchmarks/reference_pipeline.py [--backend local] [--keep DIR] [--json PATH]

Runs, in a fresh directory (so `.interlock/` with its cache, runs and MLflow store starts
empty, as in a clean clone):

    interlock run <repo>/reference_pipelines/fraud_retrain.py            # first run: trains
    interlock run <repo>/reference_pipelines/fraud_retrain.py            # again: cache hits

and prints each command with its wall time (process start to exit, imports included), the
steps served from cache, the CPU seconds used, and the load average (on a busy machine
the wall time says more about the neighbours than about the pipeline). With ``--json PATH``
it writes the rows of benchmarks/rows.py (figures "reference pipeline, first run" and
"reference pipeline, cached rerun", size 1, no native figure; ``--sizes`` is ignored).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rows import Row, write_json  # benchmarks/ is first on sys.path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "reference_pipelines" / "fraud_retrain.py"


def interlock_command() -> list[str]:
    found = shutil.which("interlock") or str(Path(sys.executable).with_name("interlock"))
    return [found] if Path(found).exists() else [sys.executable, "-m", "interlock.core.cli.main"]


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the command and its children, stdout)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "INTERLOCK_WORKDIR")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return wall, cpu, proc.stdout


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="local")
    ap.add_argument("--keep", type=Path, default=None, help="run in this directory and keep it")
    ap.add_argument("--json", metavar="PATH", default=None, help="also write the rows as JSON to PATH")
    ap.add_argument("--sizes", default=None, help="ignored: one pipeline, no size axis")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    home = args.keep or Path(tempfile.mkdtemp(prefix="interlock-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    cmd = [*interlock_command(), "run", str(PIPELINE)]
    if args.backend != "local":
        cmd += ["--backend", args.backend]
    shown = f"interlock run {PIPELINE}" + (f" --backend {args.backend}" if args.backend != "local" else "")
    print(f"directory: {home}   load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}   cpus: {os.cpu_count()}")
    try:
        for label in ("main command", "cached rerun"):
            wall, cpu, out = timed(cmd, home)
            cached = next((line.split(":", 1)[1].strip() for line in out.splitlines() if "served from cache" in line), "none")
            decision = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("decision:")), "?")
            print(f"{label:<13} {wall:6.1f}s wall ({cpu:5.1f}s CPU)  $ {shown}")
            print(f"{'':<21}served from cache: {cached}; decision: {decision}")
            name = "first run" if label == "main command" else label
            rows.append(Row(f"reference pipeline, {name}", 1, wall,
                            note=f"{args.backend}; {cpu:.1f}s CPU; served from cache: {cached}"))
        if args.json:
            write_json(rows, args.json)
    finally:
        if args.keep is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
