"""flyte2 compile time against size: the Flyte 2 module of a chain of N steps, written and imported.

    python benchmarks/flyte2_compile.py [--sizes 50,200,1000,2000] [--repeat 3] [--json PATH]

For each size N a generated module of N distinct step functions (step i reads steps i-1 and
i-2, as benchmarks/flyte_compile.py) is imported (decorators run), its pipeline lowered and
rendered, and the module written and imported once with the SDK (``interlock compile``'s check:
N tasks and their environments built). CPU seconds of this process, best of --repeat, each
size in a fresh interpreter; per step = total / N. The SDK has no offline serializer of its
own to compare against (``flyte.deploy(dry_run=True)`` needs an endpoint), so the figure is
interlock's alone: the growth exponent over the sizes says whether it is linear.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from flyte_compile import generate
from rows import Row, add_arguments, report, sizes

RUNNER = textwrap.dedent('''
    import gc, importlib, json, sys, time
    from pathlib import Path
    mod, out = sys.argv[1], Path(sys.argv[2])
    import flyte
    import interlock as il
    from interlock.adapters.flyte2.compile import compile_to
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    m = importlib.import_module(mod)
    files = compile_to(m.bench.spec, out, image="img:1", store="/mnt/il")
    print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                      "bytes": sum(Path(f).stat().st_size for f in files)}))
''')


def run_once(n: int, work: Path) -> dict[str, float]:
    mod = f"bench_f2_{n}"
    (work / f"{mod}.py").write_text(generate(n, "interlock"))
    (work / "runner.py").write_text(RUNNER)
    proc = subprocess.run([sys.executable, str(work / "runner.py"), mod, str(work / "out")], cwd=work,
                          env={"PYTHONPATH": str(work), "HOME": str(work), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{n} steps failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(n: int, repeat: int, tmp: Path) -> Row:
    best: dict[str, float] | None = None
    for r in range(repeat):
        work = tmp / f"{n}-{r}"
        work.mkdir()
        got = run_once(n, work)
        if best is None or got["cpu"] < best["cpu"]:
            best = got
    assert best is not None
    return Row("flyte2 compile", n, best["cpu"],
               note=f"CPU s, best of {repeat}; {best['cpu'] / n * 1e3:.2f} ms per step; wall {best['seconds']:.2f} s; "
                    f"module {best['bytes'] / 1e3:.0f} kB")


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap, "50,200,1000,2000")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per size; the best counts")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flyte2-compile-") as tmp:
        rows = [measure(n, args.repeat, Path(tmp)) for n in sizes(args.sizes)]
    report(rows, args.json, argv)
    return rows


if __name__ == "__main__":
    main()
