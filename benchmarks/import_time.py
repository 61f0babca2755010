"""How long `import interlock` takes, beside `import flytekit` and `import kfp`.

Each figure is the median over several fresh interpreter processes, so no module cache
carries over between samples. Two numbers per library: the import alone (timed inside the
process with perf_counter around the import statement) and the whole process (interpreter
start-up included, what a user feels on the command line). A library that is not installed
is skipped.

    python benchmarks/import_time.py            # 7 runs each
    python benchmarks/import_time.py --runs 15 --json rows.json

With ``--json PATH`` it writes the rows of benchmarks/rows.py: figures "import (vs flytekit)"
and "import (vs kfp)", size 1 (an import has no size axis; ``--sizes`` is accepted and
ignored), interlock's median import time against the other library's.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import statistics
import subprocess
import sys
import time

from rows import Row, write_json

LIBRARIES = ("interlock", "flytekit", "kfp")
PROBE = "import time; t = time.perf_counter(); import {lib}; print(time.perf_counter() - t)"


def sample(python: str, lib: str) -> tuple[float, float]:
    """(seconds inside the process for the import, seconds for the whole process)."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [python, "-c", PROBE.format(lib=lib)], capture_output=True, text=True, check=True, timeout=300
    )
    wall = time.perf_counter() - t0
    return float(out.stdout.strip().splitlines()[-1]), wall


def baseline(python: str, runs: int) -> float:
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "pass"], check=True, timeout=60)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def installed(python: str, lib: str) -> bool:
    if python == sys.executable:
        return importlib.util.find_spec(lib) is not None
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({lib!r}) is None)"
    return subprocess.run([python, "-c", probe], timeout=60).returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per library (default 7)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    parser.add_argument("--json", metavar="PATH", default=None, help="also write the rows as JSON to PATH")
    parser.add_argument("--sizes", default=None, help="ignored: an import has no size axis")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    rows = []
    for lib in LIBRARIES:
        if not installed(args.python, lib):
            rows.append({"library": lib, "skipped": "not installed"})
            continue
        sample(args.python, lib)  # warm the OS file cache; not counted
        samples = [sample(args.python, lib) for _ in range(args.runs)]
        rows.append({
            "library": lib,
            "import_s": statistics.median(s[0] for s in samples),
            "process_s": statistics.median(s[1] for s in samples),
            "min_import_s": min(s[0] for s in samples),
            "max_import_s": max(s[0] for s in samples),
        })
    startup = baseline(args.python, args.runs)
    command = shlex.join([args.python, "-c", PROBE.format(lib="LIB")])

    if args.json:
        own = next((r for r in rows if r["library"] == "interlock" and "import_s" in r), None)
        write_json([Row(f"import (vs {r['library']})", 1, own["import_s"], r["import_s"],
                        note=f"median of {args.runs} fresh processes")
                    for r in rows if own and r["library"] != "interlock" and "import_s" in r], args.json)
    print(f"median of {args.runs} fresh processes each; command: {command}")
    print(f"interpreter start-up alone (python -c pass): {startup * 1000:.0f} ms")
    print(f"{'library':<12} {'import (median)':>16} {'range':>19} {'whole process':>15}")
    for row in rows:
        if "skipped" in row:
            print(f"{row['library']:<12} skipped: {row['skipped']}")
            continue
        spread = f"{row['min_import_s'] * 1000:.0f}-{row['max_import_s'] * 1000:.0f} ms"
        print(f"{row['library']:<12} {row['import_s'] * 1000:>13.0f} ms {spread:>19} {row['process_s'] * 1000:>12.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
