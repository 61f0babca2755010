"""Per-step overhead of the local backends beside the native tools running the same shape.

    python benchmarks/backend_overhead.py [--sizes 10,50,100] [--kfp-sizes 5,10] [--repeat 1] [--reruns 1]
        [--clock wall|cpu] [--stat median|min] [--json PATH]

The shape is a chain of N trivial steps (``x + 1``), one task per step:
- flyte-local: ``il.run(..., backend="flyte-local")`` vs a hand-written flytekit ``@task``
  called N times in a ``@workflow``, cached with ``Cache(version=...)``, local execution;
- kfp-local: ``il.run(..., backend="kfp-local")`` of the chain in ``overhead_chain.py`` (a
  pipeline module of its own: every task process imports its step's module) vs N
  hand-written ``@dsl.component``s, one per step as interlock emits, chained in a
  ``@dsl.pipeline`` on ``kfp.local.SubprocessRunner(use_venv=False)`` with caching on (the
  earlier shape: ``--kfp-step-in-harness``, ``--kfp-native-one-component``). The CPU clock
  counts the parent and every task process (kfp.local waits for each).
Each side runs in a fresh interpreter with its imports done before the clock starts; the
first run starts from an empty cache, the rerun repeats it in the same process (all cache
hits; ``--reruns K``: the median of K reruns). The figure is the whole run's seconds at size
N; the table also prints per step. ``--clock cpu`` counts the CPU seconds of the side's
process and the processes it waited for (git) instead of wall seconds: steadier on a shared
machine, where the neighbours move wall times by 2x; ``--stat min`` takes the fastest of the
repeats instead of the median (what timeit recommends where others load the machine). The
two sides alternate, size by size.
"""

# No `from __future__ import annotations`: kfp reads the component's annotations as types.

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import interlock as il

HERE = Path(__file__).resolve().parent
SIZE_ENV = "INTERLOCK_BENCH_N"  # the kfp-local task processes rebuild the same chain from it


@il.step(cache=il.Cache())
def inc(x: int) -> int:
    return x + 1


def make_pipeline(n: int) -> Any:
    def body(x: int = 0):  # noqa: ANN202 - a pipeline body returns step outputs
        for i in range(n):
            x = inc.named(f"s{i}")(x=x)
        return x

    body.__module__ = __name__
    body.__name__ = body.__qualname__ = "bench"
    return il.pipeline(name=f"overhead-{n}")(body)


if __name__ != "__main__" and os.environ.get(SIZE_ENV):
    bench = make_pipeline(int(os.environ[SIZE_ENV]))



def flytekit_module(n: int) -> str:
    """A hand-written flytekit module: N cached tasks chained in a workflow."""
    lines = ["from flytekit import Cache, task, workflow\n"]
    for i in range(n):
        lines.append(f"@task(cache=Cache(version='1'))\ndef s{i}(x: int) -> int:\n    return x + 1\n")
    body = "".join(f"    x = s{i}(x=x)\n" for i in range(n))
    lines.append(f"@workflow\ndef chain(x: int = 0) -> int:\n{body}    return x\n")
    return "\n".join(lines)


def kfp_module(n: int) -> str:
    """A hand-written kfp module: N lightweight components, each one step of the chain."""
    lines = ["from kfp import dsl\n"]
    for i in range(n):
        lines.append(f"@dsl.component(base_image='python:3.11', install_kfp_package=False)\n"
                     f"def s{i}(x: int) -> int:\n    return x + 1\n")
    lines.append(f"STEPS = [{', '.join(f's{i}' for i in range(n))}]\n")
    return "\n".join(lines)


def cpu_clock() -> float:
    """CPU seconds of this process (all its threads) and of the children it waited for."""
    import resource  # os.times() counts in 10 ms ticks: too coarse for a cached rerun

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def worker(side: str, n: int, work: str, reruns: int = 1) -> dict[str, list[float]]:
    """A first run then ``reruns`` cached reruns of one side in this interpreter; wall and CPU
    seconds of each, by clock."""
    os.environ["HOME"] = work  # flytekit and kfp keep nothing of this run outside it
    cpu: list[float] = []
    times = _Times(cpu)
    if side in ("flyte-local", "kfp-local"):
        if side == "flyte-local":
            import interlock.adapters.flyte.local  # noqa: F401  (imports outside the clock)
        else:
            import kfp.local  # noqa: F401  (kfp's own import, ~2 s, as the native side has it done)

            import interlock.adapters.kfp.local  # noqa: F401
        pipeline = bench
        if side == "kfp-local" and not STEP_IN_HARNESS:
            import overhead_chain  # the step in a module of its own, as a team's pipeline module

            pipeline = overhead_chain.bench
        for _ in range(1 + reruns):
            t0 = times.start()
            r = il.run(pipeline, backend=side, workdir=work)
            times.append(time.perf_counter() - t0)
            assert r.outputs["o0"] == n, r.outputs
    elif side == "flytekit":
        import importlib

        import flytekit.core.local_cache as lc

        lc.CACHE_LOCATION = os.path.join(work, "flyte-cache")
        # One hand-written task per step, as interlock compiles one task per node; defining
        # them (and flytekit's compile of the workflow) is inside the first run's clock, as
        # building interlock's tasks is.
        Path(work, "fk_chain.py").write_text(flytekit_module(n))
        sys.path.insert(0, work)
        t0 = times.start()
        wf = importlib.import_module("fk_chain").chain
        out = wf(x=0)
        times.append(time.perf_counter() - t0)
        assert out == n, out
        for _ in range(reruns):
            t0 = times.start()
            out = wf(x=0)
            times.append(time.perf_counter() - t0)
            assert out == n, out
    elif side == "kfp.local":
        from kfp import dsl, local

        local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=os.path.join(work, "root"),
                   enable_caching=True, cache_root=os.path.join(work, "kfp-cache"))
        # Defining the components and the pipeline (kfp compiles it then) is inside the first
        # run's clock, as interlock's compile is. One component per step, as interlock emits
        # (issue 12: "the same shape: one component per step on KFP"), from a generated module
        # as the flytekit side's tasks; --kfp-native-one-component: the one shared component
        # of the earlier measurements.
        import importlib

        Path(work, "kfp_chain.py").write_text(kfp_module(1 if NATIVE_ONE_COMPONENT else n))
        sys.path.insert(0, work)
        t0 = times.start()
        steps = importlib.import_module("kfp_chain").STEPS

        @dsl.pipeline(name="overhead")
        def kchain(x: int = 0) -> int:
            t = steps[0](x=x)
            for i in range(1, n):
                t = steps[i % len(steps)](x=t.output)
            return t.output

        for _ in range(1 + reruns):
            out = kchain(x=0).output
            times.append(time.perf_counter() - t0)
            assert out == n, out
            t0 = times.start()
    return {"wall": list(times), "cpu": cpu}


class _Times(list):  # type: ignore[type-arg]
    """Wall seconds, appended as before; the CPU seconds of the same spans kept beside them."""

    def __init__(self, cpu: list[float]):
        super().__init__()
        self.cpu = cpu
        self._cpu0 = 0.0

    def start(self) -> float:
        self._cpu0 = cpu_clock()
        return time.perf_counter()

    def append(self, wall: float) -> None:
        self.cpu.append(cpu_clock() - self._cpu0)
        super().append(wall)


WORKER = ("import json, sys, backend_overhead as b; b.STEP_IN_HARNESS = sys.argv[5] == '1'; "
          "b.NATIVE_ONE_COMPONENT = sys.argv[6] == '1'; "
          "print(json.dumps(b.worker(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))))")
# kfp-local: the step in this harness module (every task imports argparse, statistics,
# subprocess... with it), as measured before; default: in overhead_chain.py.
STEP_IN_HARNESS = False
# kfp.local: one component called N times (the measurement before one component per step).
NATIVE_ONE_COMPONENT = False
CLOCK = "wall"
RERUNS = 1
STAT = statistics.median


def measure(side: str, n: int) -> tuple[float, float]:
    """(first run, cached rerun) seconds, one fresh interpreter; the rerun is the median of
    RERUNS, in the clock CLOCK."""
    with tempfile.TemporaryDirectory(prefix="il-overhead-") as work:
        # Bytecode caches as an installed package has them (a task process would otherwise
        # compile interlock's sources on every start, when PYTHONDONTWRITEBYTECODE is set).
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env = {**base, SIZE_ENV: str(n), "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, "-c", WORKER, side, str(n), work, str(RERUNS),
                               "1" if STEP_IN_HARNESS else "0", "1" if NATIVE_ONE_COMPONENT else "0"], env=env, cwd=work,
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"{side} N={n} failed:\n{proc.stderr[-3000:]}")
        first, *reruns = json.loads(proc.stdout.strip().splitlines()[-1])[CLOCK]
        return first, STAT(reruns)


def paired(sides: tuple[str, str], n: int, repeat: int) -> list[tuple[float, float]]:
    """(first, rerun) medians of each side, the two sides alternating run by run."""
    runs: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
    for _ in range(repeat):
        for side in sides:
            runs[side].append(measure(side, n))
    return [(STAT([r[0] for r in runs[s]]), STAT([r[1] for r in runs[s]])) for s in sides]


def _slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of seconds against size."""
    mean_n = sum(n for n, _ in points) / len(points)
    mean_t = sum(t for _, t in points) / len(points)
    return (sum((n - mean_n) * (t - mean_t) for n, t in points)
            / sum((n - mean_n) ** 2 for n, _ in points))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,50,100", help="chain lengths for flyte-local (comma-separated)")
    ap.add_argument("--kfp-sizes", default="5,10", help="chain lengths for kfp-local (every task is a process)")
    ap.add_argument("--backends", default="flyte-local,kfp-local")
    ap.add_argument("--repeat", type=int, default=1, help="fresh interpreters per side and size (median)")
    ap.add_argument("--reruns", type=int, default=1, help="cached reruns per interpreter (median)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall seconds, or CPU seconds of each side's process and its children")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="of the repeats (and reruns): the median, or the fastest")
    ap.add_argument("--kfp-step-in-harness", action="store_true",
                    help="kfp-local: define the step in this module, so that every task imports the harness "
                         "(the measurement before overhead_chain.py)")
    ap.add_argument("--kfp-native-one-component", action="store_true",
                    help="kfp.local: one component called N times instead of one per step "
                         "(the baseline before; interlock emits one per step)")
    ap.add_argument("--json", default=None, metavar="PATH")
    args = ap.parse_args()
    global CLOCK, RERUNS, STAT, STEP_IN_HARNESS, NATIVE_ONE_COMPONENT
    CLOCK, RERUNS, STEP_IN_HARNESS = args.clock, max(1, args.reruns), args.kfp_step_in_harness
    NATIVE_ONE_COMPONENT = args.kfp_native_one_component
    STAT = min if args.stat == "min" else statistics.median
    command = "python benchmarks/backend_overhead.py " + " ".join(sys.argv[1:])
    natives = {"flyte-local": "flytekit", "kfp-local": "kfp.local"}
    sizes = {"flyte-local": args.sizes, "kfp-local": args.kfp_sizes}
    rows: list[dict[str, Any]] = []
    print(f"{'figure':<30} {'N':>5} {'interlock s':>12} {'native s':>10} {'ratio':>6} {'ms/step il':>11} {'native':>8}")
    for backend in args.backends.split(","):
        for n in [int(s) for s in sizes[backend].split(",") if s]:
            (il_first, il_rerun), (nat_first, nat_rerun) = paired((backend, natives[backend]), n, args.repeat)
            for what, mine, theirs in (("first run", il_first, nat_first), ("cached rerun", il_rerun, nat_rerun)):
                figure = f"{backend} {what}"
                ratio = mine / theirs if theirs else None
                rows.append({"figure": figure, "size": n, "interlock_s": mine, "native_s": theirs, "ratio": ratio,
                             "note": f"chain of {n} trivial steps; native: {natives[backend]}, same shape, per step "
                                     f"{mine / n * 1e3:.1f} ms vs {theirs / n * 1e3:.1f} ms; {CLOCK} clock, {args.stat}"})
                print(f"{figure:<30} {n:>5} {mine:>12.3f} {theirs:>10.3f} {ratio:>6.2f} {mine / n * 1e3:>11.1f} "
                      f"{theirs / n * 1e3:>8.1f}", flush=True)
    # Per step without what a run costs once (receipt, git, the backend's set-up): the slope
    # between the smallest and the largest size.
    for figure in dict.fromkeys(r["figure"] for r in rows):
        mine = sorted((r["size"], r["interlock_s"], r["native_s"]) for r in rows if r["figure"] == figure)
        if len(mine) < 2:
            continue
        (n1, a1, b1), (n2, a2, b2) = mine[0], mine[-1]
        il_step, nat_step = (a2 - a1) / (n2 - n1), (b2 - b1) / (n2 - n1)
        ratio = il_step / nat_step if nat_step > 0 else None
        rows.append({"figure": f"{figure}, per step (slope)", "size": n2, "interlock_s": il_step, "native_s": nat_step,
                     "ratio": ratio, "note": f"(T({n2}) - T({n1})) / {n2 - n1}: seconds per added step"})
        shown = f"{ratio:>6.2f}" if ratio is not None else f"{'-':>6}"
        print(f"{figure + ', per step':<30} {n2:>5} {il_step * 1e3:>10.2f}ms {nat_step * 1e3:>8.2f}ms {shown}")
        if len(mine) < 3:
            continue
        # The two-point slope subtracts two noisy figures; a least-squares slope over every size
        # (each the fastest/median of its repeats) leans on all of them and moves less under load.
        il_fit = _slope([(n, a) for n, a, _ in mine])
        nat_fit = _slope([(n, b) for n, _, b in mine])
        ratio = il_fit / nat_fit if nat_fit > 0 else None
        rows.append({"figure": f"{figure}, per step (fit)", "size": n2, "interlock_s": il_fit, "native_s": nat_fit,
                     "ratio": ratio, "note": "least-squares slope of T(N) over sizes "
                                             f"{', '.join(str(n) for n, _, _ in mine)}: seconds per added step"})
        shown = f"{ratio:>6.2f}" if ratio is not None else f"{'-':>6}"
        print(f"{figure + ', per step fit':<30} {n2:>5} {il_fit * 1e3:>10.2f}ms {nat_fit * 1e3:>8.2f}ms {shown}")
    print(f"command: {command}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
