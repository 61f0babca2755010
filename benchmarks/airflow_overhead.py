"""airflow-local's cost per step, and the DAG file's parse time, against hand-written Airflow.

    python benchmarks/airflow_overhead.py [--sizes 10,30] [--parse-sizes 50,500] [--repeat 3] [--json PATH]

Figure "airflow-local per step": a linear pipeline of N steps (each adds one), run with
``il.run(..., backend="airflow-local")``, against a hand-written TaskFlow DAG of the same N
calls run with ``dag.test()``; both on a copy of one migrated SQLite database, both warm (a
first run is made and not timed: Airflow's import and in-process execution API cost seconds
once per process). Seconds per step of the timed run, best of --repeat.

Figure "airflow DAG parse": the time a real ``DagBag`` takes to load the DAG file that
``interlock compile --backend airflow`` writes for N steps (TaskFlow form), against a
hand-written DAG file with the same N tasks; each in a fresh interpreter with Airflow already
imported (the scheduler's DAG processor has it; interlock's loader is imported in the clock),
bytecode cached as for installed packages, best of --repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from rows import Row, add_arguments, report, sizes

ROOT = Path(__file__).resolve().parent.parent


def interlock_module(n: int) -> str:
    calls = "\n".join(f"    x = add.named('s{i}')(x=x)" for i in range(n))
    return textwrap.dedent('''\
        import interlock as il


        @il.step
        def add(x: int) -> int:
            return x + 1


        @il.pipeline(name="bench-chain")
        def chain(x: int = 0):
        ''') + calls + "\n    return x\n"


def native_dag(n: int) -> str:
    calls = "\n".join(f"    x = add.override(task_id='s{i}')(x)" for i in range(n))
    return textwrap.dedent('''\
        from airflow.sdk import DAG, task


        @task
        def add(x: int) -> int:
            return x + 1


        with DAG(dag_id="bench-chain", schedule=None, catchup=False) as dag:
            x = 0
        ''') + calls + "\n"


NATIVE_RUN = textwrap.dedent('''\
    import sys, time, json
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["bench-chain"]
    times = []
    for _ in range(int(sys.argv[2]) + 1):  # the first warms Airflow's execution API
        t0 = time.perf_counter()
        dr = dag.test()
        times.append(time.perf_counter() - t0)
        assert str(dr.state) == "success", dr.state
    print(json.dumps(times[1:]))
''')

PARSE = textwrap.dedent('''\
    import sys, time, json
    from airflow.dag_processing.dagbag import DagBag
    import airflow.sdk
    t0 = time.perf_counter()
    bag = DagBag(dag_folder=sys.argv[1])
    took = time.perf_counter() - t0
    assert not bag.import_errors, bag.import_errors
    assert len(bag.dags["bench-chain"].tasks) == int(sys.argv[2])
    print(json.dumps(took))
''')


def airflow_env(home: Path, db: Path, dags: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
               AIRFLOW__CORE__DAGS_FOLDER=str(dags), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING", PYTHONPATH=os.pathsep.join(sys.path))
    return env


def per_step(n: int, repeat: int, work: Path) -> Row:
    import interlock as il
    from interlock.adapters.airflow.local import template_db

    folder = work / f"steps-{n}"
    (folder / "dags").mkdir(parents=True)
    (folder / "bench_chain.py").write_text(interlock_module(n))
    (folder / "dags" / "bench_chain.py").write_text(native_dag(n))
    template = template_db(work / "cache")
    db = folder / "native.db"
    shutil.copyfile(template, db)
    proc = subprocess.run([sys.executable, "-c", NATIVE_RUN, str(folder / "dags" / "bench_chain.py"), str(repeat)],
                          env=airflow_env(folder, db, folder / "dags"), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    native = min(json.loads(proc.stdout.strip().splitlines()[-1]))
    sys.path.insert(0, str(folder))
    try:
        import importlib

        chain = importlib.import_module("bench_chain").chain
        il.run(chain, backend="airflow-local", workdir=work / "il", progress=False)  # warms the driver
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = il.run(chain, backend="airflow-local", workdir=work / "il", progress=False)
            times.append(time.perf_counter() - t0)
            assert r.outputs["o0"] == n
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("bench_chain", None)
    mine = min(times)
    return Row("airflow-local per step", n, mine / n, native / n,
               note=f"whole run {mine:.2f}s vs dag.test() {native:.2f}s")


def parse_time(n: int, repeat: int, work: Path) -> Row:
    import importlib

    import interlock as il

    folder = work / f"parse-{n}"
    (folder / "mine").mkdir(parents=True)
    (folder / "native").mkdir()
    (folder / "native" / "bench_chain.py").write_text(native_dag(n))
    (folder / "bench_parse.py").write_text(interlock_module(n))
    sys.path.insert(0, str(folder))
    try:
        chain = importlib.import_module("bench_parse").chain
        il.compile(chain, backend="airflow", out=folder / "mine", operator="taskflow")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("bench_parse", None)
    (dag_file,) = (folder / "mine").glob("*.py")
    env = airflow_env(folder, folder / "unused.db", folder)
    # Bytecode as an installed package has it (this machine's shell sets PYTHONDONTWRITEBYTECODE,
    # which would compile interlock's loader from source in every parse while Airflow loads its
    # .pyc files); the first of the --repeat parses fills the cache. Interlock's import stays in
    # the clock: a DAG processor's child pays it for each file it parses.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")

    def best(path: Path) -> float:
        out = []
        for _ in range(repeat):
            p = subprocess.run([sys.executable, "-c", PARSE, str(path), str(n)], env=env, capture_output=True,
                               text=True, timeout=600)
            assert p.returncode == 0, p.stderr[-3000:]
            out.append(json.loads(p.stdout.strip().splitlines()[-1]))
        return min(out)

    mine, native = best(dag_file), best(folder / "native" / "bench_chain.py")
    return Row("airflow DAG parse", n, mine, native, note="DagBag load of the file, Airflow imported first")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, "10,30")
    parser.add_argument("--parse-sizes", default="50,500")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-airflow-"))
    try:
        rows = [per_step(n, args.repeat, work) for n in sizes(args.sizes)]
        rows += [parse_time(n, args.repeat, work) for n in sizes(args.parse_sizes)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(rows, args.json)


if __name__ == "__main__":
    main()
