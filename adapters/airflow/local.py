"""``airflow-local``: the compiled DAG run for real by Airflow's ``dag.test()``.

One child process per run (``driver.py``): Airflow configures its settings, logging and ORM
engine from the environment at import, once per process, and can point at one metadata
database only; in a child it never disturbs the caller (or another backend's run in the same
process), and each run has a throwaway SQLite database in its own folder. The database is
migrated once per Airflow version and process, into a template that each run copies (a
migration per run would cost seconds).

The tasks leave the run state (fragments, records, values); this process settles the run from
it, as every backend does, and writes the receipt. Airflow's task states are kept in the run
folder (``airflow/result.json``) as the scheduler's view.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.status import Status
from interlock.core.model.codecs import to_jsonable
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult, settle, with_finally
from interlock.core.record.receipt import assemble_receipt, prefetch_git_info
from interlock.core.run import live
from interlock.core.run.env import EnvName
from interlock.core.run.map_items import reports
from interlock.core.run.records import ALL_KINDS

from .dag_file import write_dag
from .names import LOCAL_BACKEND, RunPlace
from .options import AirflowLocalOptions, AirflowOptions
from .worker import EVENT, Worker, stop_file

_TEMPLATES: dict[str, Path] = {}  # Airflow version -> a migrated database made by this process
_TEMPLATE_LOCK = threading.Lock()


def airflow_version() -> str:
    from importlib.metadata import version

    return version("apache-airflow-core")


def _airflow_env(home: Path, db: Path, dags: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW__LOGGING__BASE_LOG_FOLDER=str(home / "logs"),
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
        AIRFLOW__SCHEDULER__STANDALONE_DAG_PROCESSOR="False",
        PYTHONUNBUFFERED="1",
    )
    return env


DB_CACHE_ENV = "INTERLOCK_AIRFLOW_DB_CACHE"  # a folder for the migrated template (tests: one per session)


def template_db(cache_dir: Path) -> Path:
    """A migrated metadata database for this Airflow version: made once (``airflow db migrate``)
    under ``cache_dir`` (or $INTERLOCK_AIRFLOW_DB_CACHE) and reused by every run of the work
    directory, and by this process."""
    version = airflow_version()
    with _TEMPLATE_LOCK:
        held = _TEMPLATES.get(version)
        if held is not None and held.is_file():
            return held
        shared = os.environ.get(DB_CACHE_ENV)
        folder = (Path(shared) if shared else cache_dir / "airflow-db") / version
        folder.mkdir(parents=True, exist_ok=True)
        db = folder / "airflow.db"
        with open(folder / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two processes on one work directory migrate once
            if not db.is_file():
                tmp = folder / "airflow.db.tmp"
                tmp.unlink(missing_ok=True)
                proc = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"],
                                      env=_airflow_env(folder, tmp, folder), capture_output=True, text=True,
                                      timeout=600)
                if proc.returncode != 0:
                    from interlock.core.base.errors import InterlockError

                    raise InterlockError(f"airflow db migrate failed: {(proc.stdout + proc.stderr)[-2000:]}",
                                         hint="check that apache-airflow is installed (pip install 'interlock[airflow]')")
                os.replace(tmp, db)
        _TEMPLATES[version] = db
        return db


def _child_path() -> list[str]:
    # The task bodies import the team's step modules exactly as this process does.
    paths = [os.path.abspath(p or ".") for p in sys.path if os.path.exists(p or ".")]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return [*extra, *paths]


class _Server:
    """The driver child this process runs its airflow-local runs in, one run at a time."""

    lock = threading.Lock()
    proc: subprocess.Popen[str] | None = None
    home: Path | None = None

    @classmethod
    def get(cls) -> subprocess.Popen[str]:
        if cls.proc is not None and cls.proc.poll() is None:
            return cls.proc
        if cls.home is None:
            # Airflow's home for the driver's life (its airflow.cfg): this process's, not a run's.
            cls.home = Path(tempfile.mkdtemp(prefix="airflow-home-"))
            atexit.register(cls.close)
        env = _airflow_env(cls.home, cls.home / "unused.db", cls.home)
        env["PYTHONPATH"] = os.pathsep.join(_child_path())
        cls.proc = subprocess.Popen([sys.executable, "-m", "interlock.adapters.airflow.driver"], env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, bufsize=1, start_new_session=True)
        return cls.proc

    @classmethod
    def close(cls) -> None:
        proc, cls.proc = cls.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if cls.home is not None:
            shutil.rmtree(cls.home, ignore_errors=True)
            cls.home = None


@contextlib.contextmanager
def _passed_on(proc: subprocess.Popen[str]) -> Iterator[None]:
    """SIGTERM / SIGINT to this process reach the run's child: the running step stops (its shim
    checkpoints and records it stopped), no other starts, and the run ends with a receipt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        with contextlib.suppress(OSError):
            proc.send_signal(signum)

    saved = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


class AirflowLocalRun:
    def __init__(self, spec: PipelineSpec, options: RunOptions):
        self.spec, self.options = spec, options
        self.told: set[str] = set()  # the nodes whose end the tasks told live

    def execute(self, params: dict[str, Any]) -> RunResult:
        spec, options = self.spec, self.options
        started = time.time()
        prefetch_git_info(spec)
        run_dir = options.run_dir
        place = RunPlace(options.run_id, LOCAL_BACKEND, run_dir, options.cache_dir, cache=options.cache,
                         checkpoint_root=options.checkpoint_store, retry_in_process=ALL_KINDS)
        shutil.rmtree(run_dir / "airflow" / "records", ignore_errors=True)  # a resumed run decides afresh
        stop_file(run_dir).unlink(missing_ok=True)
        # The DAG folder and the metadata database are the run's own and thrown away after it:
        # the database holds the DAG run's conf (every parameter value, a password too).
        area = Path(tempfile.mkdtemp(prefix=f"airflow-run-{options.run_id}-"))
        try:
            return self._execute(params, place, area, started)
        finally:
            shutil.rmtree(area, ignore_errors=True)

    def _execute(self, params: dict[str, Any], place: RunPlace, area: Path, started: float) -> RunResult:
        spec, options = self.spec, self.options
        run_dir = place.run_dir
        dags = area / "dags"
        dag_file, _ = write_dag(spec, dags, AirflowOptions(operator="taskflow", serial=True, retries="shim",
                                                           dag_id=spec.name, state_root=str(options.workdir),
                                                           schedule=False))
        db = area / "airflow.db"
        shutil.copyfile(template_db(options.cache_dir), db)
        # A dataclass parameter may arrive as the instance or as its JSON object already.
        conf = {p.name: v if isinstance(v := params[p.name], dict) else to_jsonable(v, p.type)
                for p in spec.params if p.name in params}
        result_file = run_dir / "airflow" / "result.json"  # Airflow's view: each task instance's state
        result_file.unlink(missing_ok=True)
        # The run's own contract (EnvName) comes from place.env(); the user's other settings
        # (INTERLOCK_PUSHGATEWAY, INTERLOCK_PRICES, INTERLOCK_GIT_SHA...) reach the steps as on local.
        contract = {v for k, v in vars(EnvName).items() if k.isupper()}
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k not in contract}
        env.update({k: v for k, v in _airflow_env(area, db, dags).items() if k.startswith("AIRFLOW__DATABASE")
                    or k == "AIRFLOW__CORE__DAGS_FOLDER"})
        env.update(place.env())
        env.update({EnvName.PIPELINE: spec.name, EnvName.LIVE: live.RELAY_VERBOSE if live.verbose() else live.RELAY})
        request = {"run_dir": str(run_dir), "dag_file": str(dag_file), "dag_id": spec.name, "conf": conf,
                   "result": str(result_file), "env": env, "sys_path": _child_path()}
        code, tail = self._drive(request, AirflowLocalOptions.of(options).airflow_log)
        worker = Worker(spec, place, params)
        records = worker.book
        seen = records.seen()
        sizes = {n: r["items"] for n, r in records.all().items() if "items" in r}
        maps = reports(spec, worker.run.state, sizes)
        from interlock.core.run.bindings import gate_decisions

        gates = gate_decisions(spec, worker.params, worker.outputs)
        failed = None
        if code != 0 or not result_file.is_file():
            failed = f"Airflow's dag.test() ended with exit code {code}: {''.join(tail)[-1500:]}"
        outcome = settle(spec, worker.run.state, seen, gates=gates,
                         failed=failed if not any(s.status is Status.STOPPED for s in seen.values()) else None)
        outcome = with_finally(spec, worker.run.state, outcome, seen, gates)
        for name, o in outcome.steps.items():  # what was not told live (not run)
            if name not in self.told:
                options.emit(name, o.status, f"{o.attempts} attempt(s)" if o.attempts else "")
        outputs = {} if outcome.error else self._outputs(worker)
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=LOCAL_BACKEND, state_dir=worker.run.state_dir, params=params,
            status=outcome.status, statuses=outcome.statuses, started=started, fragments=outcome.fragments,
            outputs=outputs, gates=gates,
        )
        if outcome.error is not None:
            outcome.error.receipt_path = str(receipt)
        return RunResult(spec.name, options.run_id, LOCAL_BACKEND, outcome.status, outputs, outcome.steps, receipt,
                         outcome.error, maps=maps)

    def _drive(self, request: dict[str, Any], verbose: bool) -> tuple[int, deque[str]]:
        """Hand the run to the driver; relay the steps' lines; keep the last lines of Airflow's log."""
        from .driver import DONE

        tail: deque[str] = deque(maxlen=60)
        with _Server.lock:
            proc = _Server.get()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            with _passed_on(proc):
                for line in proc.stdout:
                    if line.startswith(DONE):
                        answer = json.loads(line[len(DONE):])
                        if answer.get("error"):
                            tail.append(answer["error"])
                        return int(answer["code"]), tail
                    if line.startswith(EVENT):
                        event = json.loads(line[len(EVENT):])
                        if event["event"] != "started":
                            self.told.add(event["node"])
                        self.options.emit(event["node"], event["event"], event["detail"])
                        continue
                    step_line = live.decode(line)
                    if step_line is not None:
                        live.publish(step_line, relay=False)
                        continue
                    tail.append(line)
                    if verbose:
                        sys.stdout.write(line)
            _Server.close()  # it died mid-run: the next run starts another
            return -1, tail

    def _outputs(self, worker: Worker) -> dict[str, Any]:
        from interlock.core.run.bindings import pipeline_output

        types = dict(self.spec.output_types)
        return {k: pipeline_output(b, worker.params, worker.outputs, types.get(k)) for k, b in self.spec.outputs}
