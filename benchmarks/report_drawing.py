"""The run report's cost per node: what every run pays at its end to draw its page.

    python benchmarks/report_drawing.py [--sizes 50,200] [--repeat 15]

Runs a chain of N trivial steps once (local backend; the page is the same on every backend),
then draws its report again and again (the graph coloured by outcome, the timeline, the cost
table, the receipt's facts) and prints the fastest drawing, per node. There is no native
figure: flytekit and kfp write no such page; this one is part of interlock's per-step
overhead on every backend.
"""

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backend_overhead  # noqa: E402 - the same chain of steps as the overhead benchmark

import interlock as il  # noqa: E402
from interlock.core.report import report_html  # noqa: E402


def per_node_us(n: int, repeat: int) -> float:
    work = tempfile.mkdtemp(prefix="il-report-bench-")
    with contextlib.redirect_stdout(io.StringIO()):
        result = il.run(backend_overhead.make_pipeline(n), backend="local", workdir=work, progress=False)
    state = Path(result.receipt_path).parent
    spec = report_html.load_spec(state)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        report_html.report_html(state, spec)
        times.append(time.perf_counter() - t)
    return min(times) / n * 1e6


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="50,200")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    for n in (int(s) for s in args.sizes.split(",")):
        print(f"report drawing, {n} steps: {per_node_us(n, args.repeat):.1f} us per node (fastest of {args.repeat})")
    print(f"command: python benchmarks/report_drawing.py --sizes {args.sizes} --repeat {args.repeat}")


if __name__ == "__main__":
    main()
