"""Compile a 200-step pipeline to Flyte protobufs through interlock, and the same DAG in flytekit.

    python benchmarks/flyte_compile.py [--steps 200] [--repeat 3]

Both sides get a generated module of N distinct step functions (step i reads steps i-1 and
i-2), import it (decorators run), build the workflow and write registrable protobufs (tasks,
workflow, default launch plan) to a directory. Each side runs in a fresh interpreter so
neither warms the other's imports; the time covers import of the pipeline module through
the last file written, best of --repeat. Prints both times and their ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HEADER_IL = "import interlock as il\n\n"
HEADER_FK = "from flytekit import task, workflow\n\n"


def generate(n: int, flavour: str) -> str:
    deco = "@il.step" if flavour == "interlock" else "@task"
    lines = [HEADER_IL if flavour == "interlock" else HEADER_FK]
    for i in range(n):
        lines.append(f"{deco}\ndef s{i:03d}(a: int, b: int) -> int:\n    return a + b + {i}\n\n")
    body = ["    a, b = x, x"]
    for i in range(n):
        body.append(f"    a, b = b, s{i:03d}(a=a, b=b)")
    body.append("    return b")
    if flavour == "interlock":
        lines.append(f'@il.pipeline(name="bench-{n}")\ndef bench(x: int = 1):\n' + "\n".join(body) + "\n")
    else:
        lines.append("@workflow\ndef bench(x: int = 1) -> int:\n" + "\n".join(body) + "\n")
    return "".join(lines)


RUNNER = textwrap.dedent('''
    import importlib, json, sys, time
    from collections import OrderedDict
    from pathlib import Path
    flavour, mod, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    import flytekit  # both sides pay for flytekit's import outside the timed region
    if flavour == "interlock":
        import interlock, interlock.adapters.flyte  # noqa: F401
    t0 = time.perf_counter()
    m = importlib.import_module(mod)
    if flavour == "interlock":
        from interlock.adapters.flyte.compile import compile_to
        files = compile_to(m.bench.spec, out, project="p", domain="d", version="v1", image="img:1", archive=False)
    else:
        from flytekit.core.launch_plan import LaunchPlan
        from flytekit.tools.serialize_helpers import _should_register_with_admin, persist_registrable_entities
        from flytekit.tools.translator import get_serializable
        from interlock.adapters.flyte.compile import settings
        mapping = OrderedDict()
        ss = settings("p", "d", "v1", "img:1")
        get_serializable(mapping, ss, m.bench)
        get_serializable(mapping, ss, LaunchPlan.get_default_launch_plan(flytekit.FlyteContextManager.current_context(), m.bench))
        out.mkdir(parents=True, exist_ok=True)
        persist_registrable_entities([e for e in mapping.values() if _should_register_with_admin(e)], str(out))
        files = list(out.glob("*.pb"))
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "files": len(files)}))
''')


def run_side(flavour: str, n: int, work: Path) -> dict[str, float]:
    mod = f"bench_{flavour}_{n}"
    (work / f"{mod}.py").write_text(generate(n, flavour))
    out = work / f"out_{flavour}"
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, flavour, mod, str(out)],
        cwd=work, env={**_env(), "PYTHONPATH": str(work)}, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{flavour} side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    best: dict[str, float] = {}
    files: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="flyte-bench-") as tmp:
        for flavour in ("flytekit", "interlock"):
            for r in range(args.repeat):
                work = Path(tmp) / f"{flavour}-{r}"
                work.mkdir()
                res = run_side(flavour, args.steps, work)
                best[flavour] = min(best.get(flavour, float("inf")), res["seconds"])
                files[flavour] = int(res["files"])
    ratio = best["interlock"] / best["flytekit"]
    print(f"command: python benchmarks/flyte_compile.py --steps {args.steps} --repeat {args.repeat}")
    print(f"flytekit direct : {best['flytekit']:.3f} s  ({files['flytekit']} protobuf files)")
    print(f"interlock       : {best['interlock']:.3f} s  ({files['interlock']} protobuf files)")
    print(f"ratio interlock/flytekit: {ratio:.2f}x")
    return {**best, "ratio": ratio}


if __name__ == "__main__":
    main()
