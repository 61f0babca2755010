"""Argo compile time against size: interlock vs the same Workflow built by hand with hera.

    python benchmarks/argo_compile.py [--sizes 50,200,1000,2000] [--repeat 3] [--json PATH]

For each size N both sides get a generated module of N distinct step functions (node i adds
the outputs of nodes i-1 and i//2). The interlock side compiles them (``il.spec`` of the
pipeline, then the argo backend's ``write``: render, validate by a round trip through hera's
models, write the YAML). The hera side builds the same Workflow with hera's own API, as an
Argo user writes it: one ``Container`` template per step with what interlock puts on each
(the task entry's command and arguments, the env contract, cpu/memory, a retryStrategy with
backoff and an exit-code expression, memoize), a ``DAG`` with one task per step, its two
arguments and its ``depends``; then ``to_yaml()`` into the file. Each side runs in a fresh
interpreter with hera and interlock imported before the clock (compile_env.py), best of
--repeat, the sides alternating; the figure is the CPU seconds of each side's process (the
wall times are in the note).
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
from pathlib import Path

from compile_env import IMPORT_INTERLOCK, Sides, note
from rows import Row, add_arguments, report, sizes

IMAGE = "interlock-python:latest"


def generate(n: int, flavour: str) -> str:
    if flavour == "interlock":
        head = textwrap.dedent('''\
            import interlock as il

            POLICY = dict(cache=il.Cache(), resources=il.Resources(cpu="500m", memory="1Gi"),
                          retry=il.Retry(transient=1, contention=il.Backoff(attempts=3, first="5m"), preempted=2))

        ''')
        deco = "@il.step(**POLICY)"
        parts = [head]
        for i in range(n):
            parts.append(f"{deco}\ndef s{i}(a: int, b: int) -> int:\n    return a + b + {i}\n\n\n")
        parts.append(f"STEPS = [{', '.join(f's{i}' for i in range(n))}]\n\n\n")
        parts.append(f'@il.pipeline(name="bench-{n}")\n'
                     "def bench(x: int = 1):\n"
                     "    o = [STEPS[0](a=x, b=x)]\n"
                     "    for i in range(1, len(STEPS)):\n"
                     "        o.append(STEPS[i](a=o[i - 1], b=o[i // 2]))\n"
                     "    return o[-1]\n")
        return "".join(parts)
    # The hera side: the step functions exist too (the image runs them); the templates carry
    # what interlock's do, and the DAG wires them the same way.
    head = textwrap.dedent(f'''\
        from hera.workflows import DAG, Container, Env, Parameter, Resources, RetryStrategy, Workflow
        from hera.workflows import models as m

        ENV = [Env(name="INTERLOCK_RUN_ID", value="{{{{workflow.name}}}}"), Env(name="INTERLOCK_PIPELINE", value="bench"),
               Env(name="INTERLOCK_BACKEND", value="argo"), Env(name="INTERLOCK_RETRY_IN_PROCESS", value="TRANSIENT"),
               Env(name="INTERLOCK_ON_CLUSTER", value="1")]
        RETRY = dict(limit=5, retry_policy="Always",
                     expression="lastRetry.status == 'Error' || asInt(lastRetry.exitCode) in [82, 83]")


        def template(i, fn):
            name = f"s{{i}}"
            return Container(
                name=name, image="{IMAGE}", command=["python", "-m", "interlock.adapters.argo.entry"],
                args=["run", "--pipeline", "bench:bench", "--node", name, "--fingerprint", f"{{i:064x}}",
                      "--out", "/tmp/interlock/out", "--in", "json", "a", "{{{{inputs.parameters.a}}}}",
                      "--in", "json", "b", "{{{{inputs.parameters.b}}}}"],
                env=ENV, resources=Resources(cpu_request="500m", memory_request="1Gi", memory_limit="1Gi"),
                inputs=[Parameter(name="a"), Parameter(name="b")],
                outputs=[Parameter(name="o0", value_from=m.ValueFrom(path="/tmp/interlock/out/o0"))],
                retry_strategy=RetryStrategy(**RETRY, backoff=m.Backoff(duration="300s", factor=2, cap="3600s",
                                                                         max_duration="21600s")),
                memoize=m.Memoize(key=f"{{i:016x}}-{{{{{{{{=sprig.sha256sum(toJson([inputs.parameters['a'], "
                                      f"inputs.parameters['b']]))}}}}}}}}", max_age="",
                                  cache=m.Cache(config_map=m.LocalObjectReference(name="interlock-cache-bench"))),
            )

    ''')
    parts = [head]
    for i in range(n):
        parts.append(f"def s{i}(a: int, b: int) -> int:\n    return a + b + {i}\n\n\n")
    parts.append(f"STEPS = [{', '.join(f's{i}' for i in range(n))}]\n\n\n")
    parts.append(textwrap.dedent(f'''\
        def make():
            with Workflow(generate_name="bench-{n}-", entrypoint="main",
                          arguments=[Parameter(name="x", value="1")]) as w:
                ts = [template(i, fn) for i, fn in enumerate(STEPS)]
                with DAG(name="main"):
                    ts[0](name="s0", arguments={{"a": "{{{{workflow.parameters.x}}}}", "b": "{{{{workflow.parameters.x}}}}"}})
                    for i in range(1, len(ts)):
                        up = sorted({{f"s{{i - 1}}", f"s{{i // 2}}"}})
                        ts[i](name=f"s{{i}}", depends=" && ".join(up), arguments={{
                            "a": f"{{{{{{{{tasks.s{{i - 1}}.outputs.parameters.o0}}}}}}}}",
                            "b": f"{{{{{{{{tasks.s{{i // 2}}.outputs.parameters.o0}}}}}}}}"}})
            return w
    '''))
    return "".join(parts)


RUNNER = textwrap.dedent('''
    import gc, importlib, json, sys, time
    from pathlib import Path
    flavour, mod, out, image = sys.argv[1:5]
    # Both sides import what they use before the clock starts: only the work is timed.
    import hera.workflows  # noqa: F401
    from hera.workflows import models  # noqa: F401
    from interlock.adapters.argo.manifest import write
    from interlock.adapters.argo.options import ArgoOptions
    #IMPORT_INTERLOCK
    gc.collect()
    loaded = set(sys.modules)
    t0, c0 = time.perf_counter(), time.process_time()
    m = importlib.import_module(mod)
    if flavour == "interlock":
        write(il.spec(m.bench), Path(out), ArgoOptions(image=image))
    else:
        Path(out).write_text(m.make().to_yaml())
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    in_clock = sorted(set(sys.modules) - loaded - {mod})
    print(json.dumps({"seconds": seconds, "cpu": cpu, "bytes": Path(out).stat().st_size, "in_clock": in_clock}))
''').replace("#IMPORT_INTERLOCK\n", IMPORT_INTERLOCK.format(adapter="argo"))


SIDES = Sides(("hera", "interlock"), generate, RUNNER, (IMAGE,))


def measure(n: int, repeat: int, tmp: Path) -> Row:
    ours, hera = SIDES.best(n, repeat, tmp)
    size = f"YAML {ours['bytes'] / 1024:.0f} vs {hera['bytes'] / 1024:.0f} KiB"
    return Row("argo compile", n, ours["cpu"], hera["cpu"], note=note(repeat, ours, hera, size))


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap, "50,200,1000,2000")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per side and size; the best counts")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="argo-bench-") as tmp:
        SIDES.warm_up(Path(tmp))
        rows = [measure(n, args.repeat, Path(tmp)) for n in sizes(args.sizes)]
    report(rows, args.json, argv)
    return rows


if __name__ == "__main__":
    main()
