"""Compile time: a 200-step pipeline through interlock vs the same DAG written directly in kfp.

    python benchmarks/kfp_compile.py [--steps 200] [--repeat 3]

Both sides build the same DAG (node i adds the outputs of nodes i-1 and i//2) with the same
per-task settings (caching, retry with backoff, cpu/memory, env, the run-id downward-API
env) and compile it to IR YAML with kfp's compiler. The interlock side includes recording
the pipeline body, validation, generating one component per node and the policy mapping.
Prints the best-of-N times, the ratio and the YAML sizes. (No `from __future__ import
annotations` here: kfp reads the direct component's annotations as types.)
"""


import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import interlock as il

STEPS = 200


@il.step(
    cache=il.Cache(),
    resources=il.Resources(cpu="500m", memory="1Gi"),
    retry=il.Retry(transient=1, contention=il.Backoff(attempts=3, first="5m"), preempted=2),
)
def add(a: int, b: int) -> int:
    return a + b


def make_pipeline(steps: int) -> il.Pipeline:
    def body(x: int = 1):  # noqa: ANN202 - a pipeline body returns step outputs
        outs = [add.named("s0")(a=x, b=x)]
        for i in range(1, steps):
            outs.append(add.named(f"s{i}")(a=outs[i - 1], b=outs[i // 2]))
        return outs[-1]

    body.__module__ = __name__
    # Named after the module attribute the components import (``<module>:bench``).
    return il.pipeline(name=f"bench-{steps}")(body)


bench = make_pipeline(STEPS)


def compile_interlock(module: object, steps: int, out: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process)."""
    from interlock.adapters.kfp import compile_pipeline

    t0, c0 = time.perf_counter(), time.process_time()
    pipe = module.make_pipeline(steps)  # type: ignore[attr-defined]
    pipe.ref = f"{module.__name__}:bench"  # type: ignore[attr-defined]
    compile_pipeline(il.spec(pipe), out)
    return time.perf_counter() - t0, time.process_time() - c0


def compile_direct(steps: int, out: Path) -> tuple[float, float]:
    from kfp import compiler, dsl, kubernetes

    t0, c0 = time.perf_counter(), time.process_time()

    @dsl.component(base_image="interlock-python:latest", install_kfp_package=False)
    def add_kfp(a: int, b: int) -> int:
        return a + b

    def configure(task: dsl.PipelineTask) -> dsl.PipelineTask:
        task.set_caching_options(enable_caching=True)
        task.set_retry(num_retries=5, backoff_duration="300s", backoff_factor=2.0, backoff_max_duration="3600s")
        task.set_cpu_request("500m").set_memory_request("1Gi").set_memory_limit("1Gi")
        task.set_env_variable("INTERLOCK_RETRY_IN_PROCESS", "FATAL,TRANSIENT")
        kubernetes.use_field_path_as_env(task, env_name="KFP_RUN_ID", field_path="metadata.labels['pipeline/runid']")
        return task

    @dsl.pipeline(name=f"bench-{steps}-direct")
    def direct(x: int = 1) -> int:
        outs = [configure(add_kfp(a=x, b=x))]
        for i in range(1, steps):
            outs.append(configure(add_kfp(a=outs[i - 1].output, b=outs[i // 2].output)))
        return outs[-1].output

    compiler.Compiler().compile(direct, str(out))
    return time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    # Components import the pipeline by module name, so use this file as a module, not __main__.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    module = importlib.import_module("kfp_compile")

    with tempfile.TemporaryDirectory(prefix="interlock-bench-") as tmp:
        out_il, out_kfp = Path(tmp) / "interlock.yaml", Path(tmp) / "direct.yaml"
        compile_direct(5, out_kfp)  # warm up kfp's imports before timing either side
        il_times, kfp_times = [], []
        for _ in range(args.repeat):
            il_times.append(compile_interlock(module, args.steps, out_il))
            kfp_times.append(compile_direct(args.steps, out_kfp))
        print(f"command: python benchmarks/kfp_compile.py --steps {args.steps} --repeat {args.repeat}")
        print(f"steps: {args.steps}")
        for label, times, out, note in (
            ("interlock -> kfp IR", il_times, out_il, "one component per node"),
            ("kfp directly       ", kfp_times, out_kfp, "one shared component"),
        ):
            wall, cpu = [t[0] for t in times], [t[1] for t in times]
            print(f"{label}: wall best {min(wall):.3f}s median {statistics.median(wall):.3f}s, "
                  f"cpu best {min(cpu):.3f}s ({out.stat().st_size / 1024:.0f} KiB YAML, {note})")
        # CPU time of this process: steadier than wall time on a shared machine.
        il_cpu, kfp_cpu = min(t[1] for t in il_times), min(t[1] for t in kfp_times)
        il_wall, kfp_wall = min(t[0] for t in il_times), min(t[0] for t in kfp_times)
        print(f"ratio interlock/kfp: {il_cpu / kfp_cpu:.2f}x cpu, {il_wall / kfp_wall:.2f}x wall (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
