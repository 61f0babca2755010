"""Run every benchmark, then print and write the figures: ratio and growth exponent per figure.

    python benchmarks/run_all.py                 # the registry's default sizes
    python benchmarks/run_all.py --quick         # small sizes only (a shared machine, a laptop)
    python benchmarks/run_all.py --only flyte_compile,kfp_compile --sizes 50,200
    python benchmarks/run_all.py --slow          # also the slow ones (the reference pipeline)

Each script in BENCHMARKS runs in its own process as
``python benchmarks/NAME.py --sizes a,b,c --json PATH [args]`` (the row convention is in
benchmarks/rows.py). A script that is missing, fails or writes no rows is reported and
skipped; the others still count. Then, per figure: interlock and native seconds at every
size, their ratio, and the growth exponent of each (the slope of a least-squares fit of
log(time) against log(size): 1 is linear, 2 quadratic). Writes:

- the results section of docs/performance.md (between its ``results`` markers), with the
  command that produced it;
- docs/performance/benchmarks.png: time against size, interlock and native side by side,
  one panel per figure with two sizes or more (needs matplotlib; said and skipped if absent);
- docs/performance/results.json: every row, for comparing two runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Bench:
    """One benchmark script: benchmarks/<name>.py, and the sizes run_all gives it."""

    name: str
    sizes: str | None  # None: the script has no size axis (run once, --sizes not passed)
    quick: str | None = None  # sizes for --quick (default: ``sizes``)
    args: tuple[str, ...] = ()  # extra arguments, e.g. ("--repeat", "1")
    slow: bool = False  # only with --slow
    timeout_s: int = 3600

    @property
    def script(self) -> Path:
        return HERE / f"{self.name}.py"


# The registry. Add a script here to have it run; a missing script is skipped with a note,
# so an entry can land before its script does. Sizes are the figure's natural unit (steps,
# items, MiB, ...): the growth exponent is fitted against them.
BENCHMARKS: list[Bench] = [
    # 5,000 steps: the largest size issue 12 names for linear Flyte compile (about a minute here).
    Bench("flyte_compile", sizes="50,200,1000,2000,5000", quick="20,50,200", args=("--repeat", "5")),
    Bench("kfp_compile", sizes="50,200,1000", quick="20,50,200", args=("--repeat", "3")),
    Bench("flyte2_compile", sizes="50,200,1000,2000", quick="20,50,200", args=("--repeat", "3")),
    Bench("flyte2_overhead", sizes="50,200", quick="10,50", args=("--repeat", "3")),
    Bench("argo_compile", sizes="50,200,1000,2000", quick="20,50,200", args=("--repeat", "3")),
    Bench("map_overhead", sizes="100,1000", quick="50,200"),
    Bench("import_time", sizes=None, args=("--runs", "5")),
    Bench("reference_pipeline", sizes=None, slow=True),
    # Checkpoint speed (MiB per state; local and S3 through a moto server) and backend
    # overhead (flyte-local steps; kfp-local tasks, every one a process) and start-up.
    Bench("checkpoint_speed", sizes="64,256", quick="16,64", args=("--repeat", "5", "--stat", "min")),
    Bench("backend_overhead", sizes="10,50,100", quick="10,20", args=("--kfp-sizes", "2,12", "--clock", "cpu", "--stat", "min", "--reruns", "3")),
    Bench("startup", sizes=None, args=("--repeat", "5")),
    # airflow-local per step vs a hand-written TaskFlow DAG under dag.test(); DAG parse at 50/500 steps.
    Bench("airflow_overhead", sizes="10,30", quick="5,10", args=("--parse-sizes", "50,500", "--repeat", "3")),
]


@dataclass
class Outcome:
    bench: Bench
    rows: list[dict] = field(default_factory=list)
    problem: str | None = None  # why there are no rows
    seconds: float = 0.0


def run(bench: Bench, sizes: str | None, json_dir: Path) -> Outcome:
    if not bench.script.exists():
        return Outcome(bench, problem=f"skipped: {bench.script.relative_to(ROOT)} does not exist")
    out = json_dir / f"{bench.name}.json"
    cmd = [sys.executable, str(bench.script), "--json", str(out), *bench.args]
    if sizes is not None:
        cmd += ["--sizes", sizes]
    print(f"\n=== {bench.name}: {shlex.join(['python', str(bench.script.relative_to(ROOT)), *cmd[2:]])}", flush=True)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=ROOT, text=True, timeout=bench.timeout_s, check=False,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except subprocess.TimeoutExpired:
        return Outcome(bench, problem=f"failed: no result within {bench.timeout_s}s", seconds=time.perf_counter() - t0)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        return Outcome(bench, problem=f"failed: exit status {done.returncode} (its output is above)", seconds=took)
    if not out.exists():
        return Outcome(bench, problem="wrote no rows (does it take --json PATH?)", seconds=took)
    try:
        rows = json.loads(out.read_text())
        for r in rows:
            r["size"], r["interlock_s"] = int(r["size"]), float(r["interlock_s"])
            r.setdefault("native_s", None), r.setdefault("ratio", None), r.setdefault("note", "")
            r["figure"] = str(r["figure"])
    except (ValueError, KeyError, TypeError) as exc:
        return Outcome(bench, problem=f"wrote rows run_all cannot read ({exc})", seconds=took)
    return Outcome(bench, rows=rows, seconds=took)


def exponent(points: list[tuple[int, float]]) -> float | None:
    """Slope of the least-squares line through (log size, log seconds); None under two sizes."""
    pts = [(math.log(n), math.log(t)) for n, t in points if n > 0 and t and t > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


@dataclass
class Figure:
    name: str
    bench: str
    rows: list[dict]

    @property
    def exponents(self) -> tuple[float | None, float | None]:
        il_ = exponent([(r["size"], r["interlock_s"]) for r in self.rows])
        native = exponent([(r["size"], r["native_s"]) for r in self.rows if r["native_s"] is not None])
        return il_, native


def figures(outcomes: list[Outcome]) -> list[Figure]:
    out: dict[str, Figure] = {}
    for o in outcomes:
        for r in o.rows:
            out.setdefault(r["figure"], Figure(r["figure"], o.bench.name, [])).rows.append(r)
    for f in out.values():
        f.rows.sort(key=lambda r: r["size"])
    return list(out.values())


def _s(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3f} s" if x < 10 else f"{x:.1f} s")


def _x(x: float | None, unit: str = "x") -> str:
    return "-" if x is None else f"{x:.2f}{unit}"


def markdown(figs: list[Figure], outcomes: list[Outcome], command: str, plot: str | None) -> str:
    lines = [f"Produced by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
             f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end).", ""]
    lines += ["| figure | sizes | ratio (interlock / native) | growth exponent, interlock | growth exponent, native |",
              "|---|---|---|---|---|"]
    for f in figs:
        ratios = [r["ratio"] for r in f.rows if r["ratio"] is not None]
        span = "-" if not ratios else (_x(ratios[0]) if len(ratios) == 1 else f"{min(ratios):.2f}-{max(ratios):.2f}x")
        e_il, e_nat = f.exponents
        sizes = ", ".join(str(r["size"]) for r in f.rows)
        lines.append(f"| {f.name} | {sizes} | {span} | {_x(e_il, '')} | {_x(e_nat, '')} |")
    lines += ["", "| figure | size | interlock | native | ratio | note |", "|---|---|---|---|---|---|"]
    for f in figs:
        for r in f.rows:
            lines.append(f"| {f.name} | {r['size']} | {_s(r['interlock_s'])} | {_s(r['native_s'])} | "
                         f"{_x(r['ratio'])} | {r['note']} |")
    skipped = [o for o in outcomes if o.problem]
    if skipped:
        lines += ["", "Not measured in this run:", ""]
        lines += [f"- `{o.bench.name}`: {o.problem}" for o in skipped]
    if plot is not None:
        lines += ["", f"![time against size, interlock and native]({plot})"]
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- results:begin (benchmarks/run_all.py rewrites this section) -->", "<!-- results:end -->"


def write_section(doc: Path, body: str) -> None:
    """Replace the results section of ``doc`` (or append one), leaving the prose around it alone."""
    text = doc.read_text() if doc.exists() else "# Performance\n\n## Results\n\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + BEGIN + "\n" + body + END + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + BEGIN + "\n" + body + END + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)


def plot(figs: list[Figure], path: Path) -> Path | None:
    """Time against size (log-log), interlock beside native, one panel per sized figure."""
    sized = [f for f in figs if len(f.rows) >= 2]
    if not sized:
        print("plot: no figure has two sizes or more; no PNG written")
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is not installed in this environment; no PNG written "
              "(the table above has every figure; `pip install matplotlib` for the plot)")
        return None
    cols = min(3, len(sized))
    rows = math.ceil(len(sized) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    for ax, f in zip(axes.flat, sized, strict=False):
        e_il, e_nat = f.exponents
        xs = [r["size"] for r in f.rows]
        ax.plot(xs, [r["interlock_s"] for r in f.rows], "o-", label=f"interlock (n^{_x(e_il, '')})")
        nat = [(r["size"], r["native_s"]) for r in f.rows if r["native_s"] is not None]
        if nat:
            ax.plot([n for n, _ in nat], [t for _, t in nat], "s--", label=f"native (n^{_x(e_nat, '')})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f.name)
        ax.set_xlabel("size")
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(sized):]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="each benchmark's small sizes")
    ap.add_argument("--slow", action="store_true", help="also the benchmarks marked slow")
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--sizes", default=None, help="override the sizes of every sized benchmark")
    ap.add_argument("--repeat", default=None, help="override --repeat where a benchmark's entry passes one")
    ap.add_argument("--doc", default=str(ROOT / "docs" / "performance.md"), help="markdown page to update")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = ap.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    unknown = only - {b.name for b in BENCHMARKS}
    if unknown:
        ap.error(f"unknown benchmark(s) {sorted(unknown)}; known: {[b.name for b in BENCHMARKS]}")
    chosen = [b for b in BENCHMARKS if (b.name in only if only else (args.slow or not b.slow))]
    command = shlex.join(["python", "benchmarks/run_all.py", *(sys.argv[1:] if argv is None else argv)])

    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="interlock-bench-") as tmp:
        for b in chosen:
            sizes = None if b.sizes is None else (args.sizes or (b.quick if args.quick and b.quick else b.sizes))
            if args.repeat and "--repeat" in b.args:
                i = b.args.index("--repeat")
                b = dataclasses.replace(b, args=(*b.args[:i + 1], args.repeat, *b.args[i + 2:]))
            outcomes.append(run(b, sizes, Path(tmp)))
            if outcomes[-1].problem:
                print(f"--- {b.name}: {outcomes[-1].problem}")

    figs = figures(outcomes)
    print(f"\ncommand: {command}")
    print(f"{'figure':<36} {'sizes':<22} {'ratios':<18} {'exp. interlock':>14} {'exp. native':>12}")
    for f in figs:
        e_il, e_nat = f.exponents
        ratios = " ".join(_x(r["ratio"]) for r in f.rows)
        print(f"{f.name:<36} {','.join(str(r['size']) for r in f.rows):<22} {ratios:<18} "
              f"{_x(e_il, ''):>14} {_x(e_nat, ''):>12}")
    for o in outcomes:
        if o.problem:
            print(f"{o.bench.name}: {o.problem}")
    if not args.no_write:
        doc = Path(args.doc)
        png = plot(figs, doc.parent / "performance" / "benchmarks.png")
        rel = Path(os.path.relpath(png, doc.parent)).as_posix() if png else None
        write_section(doc, markdown(figs, outcomes, command, rel))
        results = doc.parent / "performance" / "results.json"
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps({"command": command, "rows": [r for o in outcomes for r in o.rows],
                                       "not_measured": {o.bench.name: o.problem for o in outcomes if o.problem}},
                                      indent=1) + "\n")
        print(f"wrote {doc}, {results}" + (f", {png}" if png else ""))
    return 0 if any(o.rows for o in outcomes) or not chosen else 1


if __name__ == "__main__":
    raise SystemExit(main())
