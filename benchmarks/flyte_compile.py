"""Flyte compile time against size: interlock vs the same workflow written by hand in flytekit.

    python benchmarks/flyte_compile.py [--sizes 50,200,1000] [--repeat 3] [--json PATH]

For each size N both sides get a generated module of N distinct step functions (step i reads
steps i-1 and i-2), import it (decorators run), build the workflow and write registrable
protobufs (tasks, workflow, default launch plan) to a directory. Each side runs in a fresh
interpreter so neither warms the other's imports (flytekit, and interlock's public names and
every module of interlock.core and of the Flyte adapter, are imported outside the timed region
on both sides, bytecode cached as for an installed package: see compile_env.py); the time
covers import of the pipeline module through the last file written, best of --repeat, the two sides alternating. One row per size: figure
"flyte compile", the CPU seconds of interlock's process and of flytekit's (steadier than
wall time on a shared machine; the wall times are in the note) and their ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
from pathlib import Path

from compile_env import IMPORT_INTERLOCK, Sides, note
from rows import Row, add_arguments, report, sizes

HEADER_IL = "import interlock as il\n\n"
HEADER_FK = "from flytekit import task, workflow\n\n"


def generate(n: int, flavour: str) -> str:
    deco = "@il.step" if flavour == "interlock" else "@task"
    lines = [HEADER_IL if flavour == "interlock" else HEADER_FK]
    for i in range(n):
        lines.append(f"{deco}\ndef s{i:03d}(a: int, b: int) -> int:\n    return a + b + {i}\n\n")
    lines.append(f"STEPS = [{', '.join(f's{i:03d}' for i in range(n))}]\n\n")
    # A loop, not N lines: both tools then do the same per-step work whatever N is (a body of
    # N statements makes some inspection per call grow with the body's size).
    body = "    a, b = x, x\n    for s in STEPS:\n        a, b = b, s(a=a, b=b)\n    return b\n"
    if flavour == "interlock":
        lines.append(f'@il.pipeline(name="bench-{n}")\ndef bench(x: int = 1):\n' + body)
    else:
        lines.append("@workflow\ndef bench(x: int = 1) -> int:\n" + body)
    return "".join(lines)


RUNNER = textwrap.dedent('''
    import gc, importlib, json, sys, time
    from collections import OrderedDict
    from pathlib import Path
    flavour, mod, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    # Both sides import what they use before the clock starts: only the work is timed.
    import flytekit
    from flytekit.core.launch_plan import LaunchPlan
    from flytekit.tools.serialize_helpers import _should_register_with_admin, persist_registrable_entities
    from flytekit.tools.translator import get_serializable
    from interlock.adapters.flyte.compile import compile_to, settings
    #IMPORT_INTERLOCK
    # Start from a collected heap: a full collection left pending by the imports above
    # would otherwise land in the timed region of one side only (0.2-0.3 s with flytekit loaded).
    gc.collect()
    loaded = set(sys.modules)
    t0, c0 = time.perf_counter(), time.process_time()
    m = importlib.import_module(mod)
    if flavour == "interlock":
        files = compile_to(m.bench.spec, out, project="p", domain="d", version="v1", image="img:1", archive=False)
    else:
        mapping = OrderedDict()
        ss = settings("p", "d", "v1", "img:1")
        get_serializable(mapping, ss, m.bench)
        get_serializable(mapping, ss, LaunchPlan.get_default_launch_plan(flytekit.FlyteContextManager.current_context(), m.bench))
        out.mkdir(parents=True, exist_ok=True)
        persist_registrable_entities([e for e in mapping.values() if _should_register_with_admin(e)], str(out))
        files = list(out.glob("*.pb"))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    in_clock = sorted(set(sys.modules) - loaded - {mod})
    print(json.dumps({"seconds": seconds, "cpu": cpu, "files": len(files), "in_clock": in_clock}))
''').replace("#IMPORT_INTERLOCK\n", IMPORT_INTERLOCK.format(adapter="flyte"))


SIDES = Sides(("flytekit", "interlock"), generate, RUNNER, out="out_{flavour}")


def measure(n: int, repeat: int, tmp: Path) -> Row:
    ours, fk = SIDES.best(n, repeat, tmp)
    if ours["files"] != fk["files"]:
        raise SystemExit(f"{n} steps: interlock wrote {ours['files']} files, flytekit {fk['files']}")
    return Row("flyte compile", n, ours["cpu"], fk["cpu"],
               note=note(repeat, ours, fk, f"{int(ours['files'])} protobuf files each"))


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap, "50,200,1000")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per side and size; the best counts")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flyte-bench-") as tmp:
        SIDES.warm_up(Path(tmp))
        rows = [measure(n, args.repeat, Path(tmp)) for n in sizes(args.sizes)]
    report(rows, args.json, argv)
    return rows


if __name__ == "__main__":
    main()
