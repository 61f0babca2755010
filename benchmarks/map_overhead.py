"""il.map overhead on `local`: per-item cost beside a plain Python loop and flytekit's local map_task;
and the compiled graph size for 10 and 1,000 items (it must not grow: the list is a runtime value).

    python benchmarks/map_overhead.py [--sizes 100,1000] [--concurrency 8] [--json PATH] [--no-graph]

The item function is trivial (x + 1), so what is measured is the machinery per item: on
`local`, the shim per item (two atomic receipt-fragment writes: one before the call, so a
killed process still shows the attempt, one after; the value's JSON round trip; the item's
node name); for flytekit, its local array-node loop with literal conversion per item. Both
sides do the same work (the map, then a step summing its list) from a warm process. Run it from the
repository root (the pipeline module must be importable for the compile half).
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # so `map_overhead` imports for compiling

from rows import Row, add_arguments, report, sizes  # noqa: E402

import interlock as il  # noqa: E402
from interlock.core.dsl.fanout import map as il_map  # noqa: E402  (il.map once exported)


@il.step
def inc(x: int) -> int:
    return x + 1


@il.step
def total(parts: list[int]) -> int:
    return sum(parts)


def make(n: int, concurrency: int | None) -> il.Pipeline:
    @il.pipeline(name="map-overhead")
    def p(xs: list[int] = list(range(n))):  # noqa: B006 - a default for the runtime list
        return total(parts=il_map(inc, over=xs, concurrency=concurrency))

    p.__module__ = "map_overhead"
    return p


def plain_loop(n: int) -> float:
    t0 = time.perf_counter()
    assert sum(inc.fn(x) for x in range(n)) == sum(range(n)) + n
    return time.perf_counter() - t0


def interlock_local(n: int, concurrency: int | None) -> float:
    p = make(n, concurrency)
    with tempfile.TemporaryDirectory() as work:
        t0 = time.perf_counter()
        r = il.run(p, backend="local", workdir=work, cache=False)
        elapsed = time.perf_counter() - t0
    assert r.outputs["o0"] == sum(range(n)) + n
    return elapsed


def flytekit_map_task(n: int) -> float | None:
    try:
        from flytekit import map_task, task, workflow
    except ImportError:
        return None
    finc, ftotal = task(_finc), task(_ftotal)
    wf = workflow(_flyte_wf(map_task, finc, ftotal))
    t0 = time.perf_counter()
    out = wf(xs=list(range(n)))
    elapsed = time.perf_counter() - t0
    assert out == sum(range(n)) + n
    return elapsed


def _finc(x: int) -> int:
    return x + 1


def _ftotal(parts: list[int]) -> int:
    return sum(parts)


def _flyte_wf(map_task, finc, ftotal):  # noqa: ANN001, ANN202 - flytekit objects
    # The same work as the il pipeline: the map, then a step that sums its list.
    def flyte_map(xs: list[int]) -> int:
        return ftotal(parts=map_task(finc)(x=xs))

    flyte_map.__qualname__ = "flyte_map"
    return flyte_map


def graph_sizes(backend: str) -> tuple[int, int] | None:
    import json

    sizes = []
    for n in (10, 1000):
        import dataclasses

        # A pipeline made in a function has no importable ref; compiling only needs one to name.
        spec = dataclasses.replace(il.pipeline_spec(make(n, 8)) if hasattr(il, "pipeline_spec")
                                   else make(n, 8).spec, ref="map_overhead:pipeline")
        with tempfile.TemporaryDirectory() as out:
            try:
                opts = {"image": "registry/team/image:1"}
                paths = il.compile(spec, backend=backend, out=Path(out) / "c", **opts)
            except Exception as exc:  # backend not installed
                print(f"  {backend}: cannot compile ({exc})")
                return None
            if backend == "kfp":
                import yaml

                doc = next(yaml.safe_load_all(paths[0].read_text()))
                sizes.append(len(json.dumps([doc["root"]["dag"], doc["components"], doc["deploymentSpec"]],
                                            sort_keys=True)))
            else:  # the workflow template (the list's default lives in the launch plan)
                sizes.append(sum(p_.stat().st_size for p_ in paths if p_.name.endswith("_2.pb")))
    return sizes[0], sizes[1]


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser()
    add_arguments(ap, "100,1000")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--no-graph", action="store_true", help="skip the compiled-graph size check")
    args = ap.parse_args(argv)
    rows = []
    # Both sides from a warm process: the first run of each pays imports and first-call caches.
    interlock_local(2, 1)
    flytekit_map_task(2)
    for n in sizes(args.sizes):
        loop = plain_loop(n)
        seq = interlock_local(n, 1)
        par = interlock_local(n, args.concurrency)
        flyte = flytekit_map_task(n)
        rows.append(Row("il.map on local vs flytekit map_task", n, seq, flyte,
                        note=f"{seq * 1e3 / n:.2f} ms/item; {args.concurrency} at once {par * 1e3 / n:.2f} ms/item; "
                             f"plain loop {loop * 1e3 / n:.4f} ms/item"))
    report(rows, args.json, argv)
    for backend in () if args.no_graph else ("kfp", "flyte"):
        graph = graph_sizes(backend)
        if graph:
            print(f"  compiled graph, {backend}: {graph[0]} bytes for 10 items, {graph[1]} for 1000 "
                  f"({'equal' if graph[0] == graph[1] else 'DIFFERENT'})")
    return rows


if __name__ == "__main__":
    main()
