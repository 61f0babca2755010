"""flyte2-local's cost per step beside native Flyte 2 tasks doing the same work in local mode.

    python benchmarks/flyte2_overhead.py [--sizes 50,200] [--repeat 3] [--floor] [--json PATH]

The shape is a chain of N trivial steps (``x + 1``), one task per step, every task cached:
- interlock: ``il.run(..., backend="flyte2-local")`` of the chain (the compiled module, run in
  the SDK's local mode, with the shim, fragments, settling and the receipt);
- native: N hand-written ``@env.task async def s_i(x: int) -> int`` with
  ``flyte.Cache("auto", version_override="v1")``, awaited one after another by a driver task,
  run with ``flyte.with_runcontext(mode="local").run``.
Both run in this process, imports and one warm-up run of each done before the clock starts,
the SDK's cache in a fresh directory per side and repeat. Each side's tasks are made once: the
native driver before the clock, interlock's compiled module at the warm-up run (flyte2-local
keeps a spec's module for every later run in the process, whatever its work directory). The first run starts from an empty
cache; the rerun repeats it (every task a cache hit). CPU seconds of this process (steadier
than wall time on a shared machine; wall in the note), best of --repeat.

The figures, per phase (first run, cached rerun):
- ``flyte2-local first run`` / ``cached rerun`` at each size N: the whole run, T(N), each side;
  the note's "per step" is T(N) / N, which counts the run's fixed costs (interlock's receipt,
  report, lineage and console summary; the SDK's run set-up) into every step.
- ``... slope`` (with two sizes or more, from the smallest a and the largest b): the
  row holds T(b) - T(a), the cost of b - a more steps (its size), so the ratio is the ratio of
  the per-step slopes (T(b) - T(a)) / (b - a), what one more step costs each side with the
  fixed costs cancelled out; the note gives the slopes in ms a step and each side's fixed cost
  per run, T(a) - a * slope (the intercept of the line through both sizes).
- with ``--floor``, ``flyte2-local first run, shim as a bare call`` (and its slope): the same
  first run with each step's shim (``execute_step``: its fragments, stop markers, retry
  taxonomy, redaction and signals) replaced by a bare call of the step function. A diagnostic,
  not a mode of interlock: it shows what the driver, the value store, the receipt and the
  report cost without the shim, so what the shim's durable records add per step is the
  difference between the two first-run slopes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from overhead_chain import make_pipeline
from rows import Row, add_arguments, report, sizes

import interlock as il


def native_driver(n: int) -> Any:
    import flyte

    env = flyte.TaskEnvironment(name=f"native-{n}")
    steps = []
    for i in range(n):
        async def s(x: int) -> int:
            return x + 1

        s.__name__ = s.__qualname__ = f"s{i}"
        steps.append(env.task(cache=flyte.Cache("auto", version_override="v1"))(s))

    async def chain(x: int = 0) -> int:
        for step in steps:
            x = await step(x=x)
        return x

    return env.task(chain)


@contextmanager
def bare_shim() -> Iterator[None]:
    """Each flyte2 step task calls its function directly instead of through the shim (--floor)."""
    import interlock.adapters.flyte2.task as step_task
    from interlock.core.run.runtime import StepResult, outputs_of

    def bare(run: Any, step: Any, node: str, inputs: Callable[[], dict[str, Any]], fn: Any) -> StepResult:
        t0 = time.time()
        return StepResult(node, step.name, outputs_of(step, fn(**inputs())), [], t0, time.time(), [])

    shim, step_task.execute_step = step_task.execute_step, bare
    try:
        yield
    finally:
        step_task.execute_step = shim


def clocked(fn: Callable[[], Any]) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - t0


def measure(n: int, repeat: int, tmp: Path, floor: bool = False) -> list[Row]:
    import flyte

    from interlock.adapters.flyte2.local import isolated_flyte

    pipe, driver = make_pipeline(n, "f2-overhead"), native_driver(n)
    best: dict[str, tuple[float, float]] = {}
    for r in range(repeat + 1):  # the first round warms both up and is not counted
        work = tmp / f"il-{n}-{r}"

        def il_run(work: Path = work) -> None:
            result = il.run(pipe, backend="flyte2-local", workdir=str(work), x=0)
            assert result.outputs == {"o0": n}, result.error

        cache = tmp / f"native-{n}-{r}"

        def native_run(cache: Path = cache) -> None:
            with isolated_flyte(cache):
                done = flyte.with_runcontext(mode="local", raw_data_path=str(cache / "raw"),
                                             run_base_dir=str(cache / "base")).run(driver, x=0)
            assert done.outputs()[0] == n

        def il_bare(work: Path = tmp / f"bare-{n}-{r}") -> None:
            with bare_shim():
                il_run(work)

        sides = [("il-first", il_run), ("il-rerun", il_run), ("native-first", native_run), ("native-rerun", native_run)]
        for side, fn in sides + ([("bare-first", il_bare)] if floor else []):
            got = clocked(fn)
            if r and (side not in best or got[0] < best[side][0]):
                best[side] = got
    rows = []
    if floor:
        (bc, bw), (nc, nw) = best["bare-first"], best["native-first"]
        rows.append(Row("flyte2-local first run, shim as a bare call", n, bc, nc,
                        note=f"CPU s, best of {repeat}; diagnostic (--floor): no fragments, markers or retries; "
                             f"wall {bw:.2f} vs {nw:.2f} s"))
    for phase in ("first", "rerun"):
        (ic, iw), (nc, nw) = best[f"il-{phase}"], best[f"native-{phase}"]
        rows.append(Row(f"flyte2-local {'first run' if phase == 'first' else 'cached rerun'}", n, ic, nc,
                        note=f"CPU s, best of {repeat}; per step {ic / n * 1e3:.1f} vs {nc / n * 1e3:.1f} ms; "
                             f"wall {iw:.2f} vs {nw:.2f} s"))
    return rows


def slopes(rows: list[Row]) -> list[Row]:
    """The per-step slope of each phase between the smallest and the largest size measured
    (one row a phase; none with a single size): see the module's docstring."""
    out = []
    for phase in ("first run", "cached rerun", "first run, shim as a bare call"):
        mine = sorted((r for r in rows if r.figure == f"flyte2-local {phase}"), key=lambda r: r.size)
        if len(mine) < 2 or mine[0].native_s is None or mine[-1].native_s is None:
            continue
        a, b = mine[0], mine[-1]
        steps = b.size - a.size
        d_il, d_nat = b.interlock_s - a.interlock_s, b.native_s - a.native_s
        fixed_il, fixed_nat = a.interlock_s - a.size * d_il / steps, a.native_s - a.size * d_nat / steps
        out.append(Row(f"flyte2-local {phase} slope", steps, d_il, d_nat,
                       note=f"CPU s of {steps} more steps ({a.size} -> {b.size}); per step {d_il / steps * 1e3:.2f} "
                            f"vs {d_nat / steps * 1e3:.2f} ms; fixed per run {fixed_il * 1e3:.1f} vs "
                            f"{fixed_nat * 1e3:.1f} ms"))
    return out


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap, "50,200")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per side and size; the best counts")
    ap.add_argument("--floor", action="store_true",
                    help="also time the first run with each step's shim replaced by a bare call (a diagnostic)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flyte2-bench-") as tmp:
        rows = [row for n in sizes(args.sizes) for row in measure(n, args.repeat, Path(tmp), args.floor)]
    rows += slopes(rows)
    report(rows, args.json, argv)
    return rows


if __name__ == "__main__":
    main()
