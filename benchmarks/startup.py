"""Start-up costs a person feels: CLI verbs beside `python -c pass`, and a refused KFP retry.

    python benchmarks/startup.py [--repeat 5] [--json PATH]

Each figure is the median wall time of a fresh process, run --repeat times:
- `interlock backends`, `interlock --help`, `interlock graph FILE` (a two-step pipeline);
  native: `python -c pass`, the floor any Python command pays;
- a refused retry: the KFP task process of the reference pipeline's ``train`` step after it
  failed FATAL (a stop marker), as kfp's executor runs it. With the node's slice of the
  compiled spec (what components carry now) and, for comparison, without it (the old path:
  import the pipeline module and trace the pipeline first). The note says whether the
  pipeline's module was imported.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

DEMO = textwrap.dedent("""
    import interlock as il

    @il.step
    def double(x: int) -> int:
        return 2 * x

    @il.pipeline
    def demo(x: int = 2):
        return double(x=double(x=x))
""")

REFUSED = textwrap.dedent("""
    import json, sys
    from interlock.adapters.kfp.entry import run_node
    from interlock.core.base.errors import StepFailed
    ref, node, fp, task = json.loads(sys.argv[1])
    try:
        run_node(ref, node, fp, {}, *([task] if task else []))
    except StepFailed as exc:
        assert "already failed FATAL" in str(exc), exc
    print(json.dumps({"imported": "reference_pipelines.fraud_retrain" in sys.modules}))
""")


def timed(argv: list[str], repeat: int, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[:3]} failed:\n{done.stderr[-2000:]}")
        out = done.stdout
    return statistics.median(times), out


def refused_retry_env(work: Path) -> tuple[dict[str, str], list[Any]]:
    """A state dir where the fraud pipeline's `train` failed FATAL, and the task's arguments."""
    sys.path.insert(0, str(ROOT))
    import interlock as il
    from interlock.core.base.status import FailureKind
    from interlock.core.failure.record import Failure
    from interlock.core.run.env import RunEnv
    from interlock.core.run.records import StopMarker
    from interlock.core.run.state import RunState
    from reference_pipelines.fraud_retrain import fraud_retrain

    spec = il.spec(fraud_retrain)
    state = work / "state"
    RunState(state, "bench-refused").write_marker(
        "train", Failure(FailureKind.FATAL, "CUDA out of memory", rule="bench"), StopMarker.FATAL)
    env = {**os.environ, **RunEnv(run_id="bench-refused", state_dir=state, backend="kfp").to_env(),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        from interlock.adapters.kfp.node_task import NodeTask
    except ImportError:  # an interlock from before components carried their node slice
        task = None
    else:
        task = NodeTask.of(spec, "train").dumps()
    return env, [spec.ref, "train", spec.step("train").fingerprint, task]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="1", help="unused (one size: a process); kept for the common interface")
    ap.add_argument("--json", default=None, metavar="PATH")
    args = ap.parse_args()
    command = "python benchmarks/startup.py " + " ".join(sys.argv[1:])
    cli = [sys.executable, "-c", "import sys; from interlock.core.cli.main import main; sys.exit(main())"]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="il-startup-") as tmp:
        work = Path(tmp)
        (work / "startup_demo.py").write_text(DEMO)
        floor, _ = timed([sys.executable, "-c", "pass"], args.repeat)
        for figure, extra in (("interlock backends", ["backends"]), ("interlock --help", ["--help"]),
                              ("interlock graph", ["graph", str(work / "startup_demo.py")])):
            took, _ = timed(cli + extra, args.repeat, cwd=work)
            rows.append({"figure": figure, "size": 1, "interlock_s": took, "native_s": floor, "ratio": took / floor,
                         "note": "native: python -c pass"})
        env, task_args = refused_retry_env(work)
        cases = [("refused retry (fraud train)", task_args[3])] if task_args[3] else []
        for figure, task in [*cases, ("refused retry, spec re-traced (old path)", None)]:
            took, out = timed([sys.executable, "-c", REFUSED, json.dumps([*task_args[:3], task])], args.repeat,
                              env=env, cwd=work)
            imported = json.loads(out.strip().splitlines()[-1])["imported"]
            rows.append({"figure": figure, "size": 1, "interlock_s": took, "native_s": floor, "ratio": took / floor,
                         "note": f"whole task process; pipeline module imported: {imported}; native: python -c pass"})
    print(f"{'figure':<44} {'interlock s':>11} {'python -c pass':>15} {'ratio':>6}  note")
    for r in rows:
        print(f"{r['figure']:<44} {r['interlock_s']:>11.3f} {r['native_s']:>15.3f} {r['ratio']:>6.1f}  {r['note']}")
    print(f"command: {command}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
