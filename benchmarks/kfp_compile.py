"""KFP compile time against size: interlock vs the same pipeline written directly in kfp.

    python benchmarks/kfp_compile.py [--sizes 50,200,1000] [--repeat 3] [--json PATH]

For each size N both sides get a generated module of N distinct step functions (node i adds
the outputs of nodes i-1 and i//2): interlock steps on one side, ``@dsl.component``s on the
other (one component per step, as interlock emits), with the same per-task settings (caching,
retry with backoff, cpu/memory, the env the shim reads, the run-id downward-API env, the
pipeline root). The kfp pipeline is built by a function the runner calls after the import
(see generate()). Each side runs in a fresh interpreter with kfp and interlock (its public
names, every module of interlock.core and of the KFP adapter) imported before the clock
starts, bytecode cached as for an installed package (compile_env.py); the time covers importing the module (decorators run), building the
pipeline and writing the IR YAML, best of --repeat, the sides alternating. One row per size:
figure "kfp compile", the CPU seconds of each side's process (steadier than wall time on a
shared machine; the wall times are in the note). (No ``from __future__ import annotations`` in the generated kfp module:
kfp reads the annotations as types.)
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
from pathlib import Path

from compile_env import IMPORT_INTERLOCK, Sides, note
from rows import Row, add_arguments, report, sizes

# Retried steps need run state that outlives a pod: the pipeline root keeps it (both sides set it).
PIPELINE_ROOT = "s3://bench/pipeline-root"
IMAGE = "interlock-python:latest"


def generate(n: int, flavour: str) -> str:
    if flavour == "interlock":
        head = textwrap.dedent('''\
            import interlock as il

            POLICY = dict(cache=il.Cache(), resources=il.Resources(cpu="500m", memory="1Gi"),
                          retry=il.Retry(transient=1, contention=il.Backoff(attempts=3, first="5m"), preempted=2))

        ''')
        deco = "@il.step(**POLICY)"
    else:
        head = textwrap.dedent(f'''\
            from kfp import dsl, kubernetes


            def configure(task):
                task.set_caching_options(enable_caching=True)
                task.set_retry(num_retries=5, backoff_duration="300s", backoff_factor=2.0, backoff_max_duration="3600s")
                task.set_cpu_request("500m").set_memory_request("1Gi").set_memory_limit("1Gi")
                task.set_env_variable("INTERLOCK_ON_CLUSTER", "1")
                task.set_env_variable("INTERLOCK_RETRY_IN_PROCESS", "FATAL,TRANSIENT")
                task.set_env_variable("INTERLOCK_STATE_STORE", "{PIPELINE_ROOT}")
                kubernetes.use_field_path_as_env(task, env_name="KFP_RUN_ID", field_path="metadata.labels['pipeline/runid']")
                return task

        ''')
        deco = f'@dsl.component(base_image="{IMAGE}", install_kfp_package=False)'
    parts = [head]
    for i in range(n):
        parts.append(f"{deco}\ndef s{i}(a: int, b: int) -> int:\n    return a + b + {i}\n\n\n")
    parts.append(f"STEPS = [{', '.join(f's{i}' for i in range(n))}]\n\n\n")
    # A loop, not N lines: kfp's task setters call inspect.stack(), and for each frame Python
    # walks the code's positions up to the current instruction, so a pipeline function of N
    # statements costs O(N) per setter call (O(N^2) in all), a loop O(1).
    if flavour == "interlock":
        parts.append(f'@il.pipeline(name="bench-{n}")\n'
                     "def bench(x: int = 1):\n"
                     "    o = [STEPS[0](a=x, b=x)]\n"
                     "    for i in range(1, len(STEPS)):\n"
                     "        o.append(STEPS[i](a=o[i - 1], b=o[i // 2]))\n"
                     "    return o[-1]\n")
    else:
        # Built when the runner calls make(), as interlock builds when compiling: the setters'
        # inspect.stack() also grows with the stack's depth, and a module-level @dsl.pipeline
        # would run under importlib's frames on this side only.
        parts.append("def make():\n"
                     f'    @dsl.pipeline(name="bench-{n}", pipeline_root="{PIPELINE_ROOT}")\n'
                     "    def bench(x: int = 1) -> int:\n"
                     "        o = [configure(STEPS[0](a=x, b=x))]\n"
                     "        for i in range(1, len(STEPS)):\n"
                     "            o.append(configure(STEPS[i](a=o[i - 1].output, b=o[i // 2].output)))\n"
                     "        return o[-1].output\n"
                     "    return bench\n")
    return "".join(parts)


RUNNER = textwrap.dedent('''
    import gc, importlib, json, sys, time
    from pathlib import Path
    flavour, mod, out, image, root = sys.argv[1:6]
    # Both sides import what they use before the clock starts: only the work is timed.
    from kfp import compiler, dsl, kubernetes  # noqa: F401
    from interlock.adapters.kfp.policies import KfpOptions
    from interlock.adapters.kfp.compile import compile_pipeline
    #IMPORT_INTERLOCK
    # Start from a collected heap: a full collection left pending by the imports above
    # would otherwise land in the timed region of one side only (0.2-0.3 s with flytekit loaded).
    gc.collect()
    loaded = set(sys.modules)
    t0, c0 = time.perf_counter(), time.process_time()
    m = importlib.import_module(mod)
    if flavour == "interlock":
        compile_pipeline(il.spec(m.bench), Path(out), KfpOptions(image=image, pipeline_root=root))
    else:
        compiler.Compiler().compile(m.make(), out)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    in_clock = sorted(set(sys.modules) - loaded - {mod})
    print(json.dumps({"seconds": seconds, "cpu": cpu, "bytes": Path(out).stat().st_size, "in_clock": in_clock}))
''').replace("#IMPORT_INTERLOCK\n", IMPORT_INTERLOCK.format(adapter="kfp"))


SIDES = Sides(("kfp", "interlock"), generate, RUNNER, (IMAGE, PIPELINE_ROOT))


def measure(n: int, repeat: int, tmp: Path) -> Row:
    ours, kfp = SIDES.best(n, repeat, tmp)
    size = f"YAML {ours['bytes'] / 1024:.0f} vs {kfp['bytes'] / 1024:.0f} KiB"
    return Row("kfp compile", n, ours["cpu"], kfp["cpu"], note=note(repeat, ours, kfp, size))


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap, "50,200,1000")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per side and size; the best counts")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kfp-bench-") as tmp:
        SIDES.warm_up(Path(tmp))
        rows = [measure(n, args.repeat, Path(tmp)) for n in sizes(args.sizes)]
    report(rows, args.json, argv)
    return rows


if __name__ == "__main__":
    main()
