"""airflow-local's child process: load each run's compiled DAG with a real ``DagBag`` and run
it with ``dag.test()`` against that run's own SQLite metadata database.

Airflow configures itself (settings, logging, the ORM engine, signal handlers) from the
environment when it is imported, once per process: in a child of its own it never disturbs
the caller, or another backend's run in the same process. The child serves the runs of its
parent one after another (importing Airflow and starting its in-process execution API cost
seconds; they are paid once per parent process): for each request it points Airflow's ORM at
the run's database, runs the DAG, and answers with one tagged line on stdout.

    python -m interlock.adapters.airflow.driver      (requests: one JSON object per stdin line)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

DONE = "\x1finterlock-airflow-done\x1f"  # starts the answer line of a request
_current: dict[str, Path] = {}
_BASE_PATH = list(sys.path)


def _on_stop(signum: int, frame: Any) -> None:
    # Between steps (while a step runs, the shim has its own handler): no task starts its node now.
    from .worker import stop_file

    run_dir = _current.get("run_dir")
    if run_dir is not None:
        stop_file(run_dir).parent.mkdir(parents=True, exist_ok=True)
        stop_file(run_dir).write_text(signal.Signals(signum).name)


def _forget_modules(added: list[str]) -> None:
    """Modules imported from folders this run added to the path (a test's own folder) are
    imported again: another run may have a different module of the same name there."""
    roots = tuple(os.path.join(os.path.abspath(p), "") for p in added)
    if not roots:
        return
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and os.path.abspath(f).startswith(roots):
            del sys.modules[name]


def _prepare(request: dict[str, Any]) -> None:
    # The parent's environment as it is now (a test sets a variable the steps read), Airflow's
    # own settings kept but for the run's database and DAGs folder.
    for key in [k for k in os.environ if not k.startswith("AIRFLOW") and k not in request["env"]]:
        del os.environ[key]
    os.environ.update(request["env"])
    added = [p for p in request.get("sys_path", []) if p not in _BASE_PATH]
    _forget_modules(added)
    sys.path[:] = [*added, *_BASE_PATH]
    import tempfile

    tempfile.tempdir = None  # from this run's TMPDIR
    from airflow import settings

    settings.configure_vars()  # the run's database and DAGs folder, from the variables just set
    settings.reconfigure_orm()


def _items_in_index_order() -> None:
    """dag.test() runs the task instances ready at once by iterating a set, so a map's items
    ran in the order of their hashes (random per process): a stop stopped whichever item came
    first. Hashed by map index, they run in index order, as on every other backend."""
    from airflow.models.taskinstance import TaskInstance

    TaskInstance.__hash__ = lambda self: hash(self.map_index)  # type: ignore[method-assign]


def run(request: dict[str, Any]) -> dict[str, Any]:
    _current["run_dir"] = Path(request["run_dir"])
    _prepare(request)
    _items_in_index_order()
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=request["dag_file"])
    if bag.import_errors:
        return {"code": 3, "error": f"the DAG file did not load: {json.dumps(bag.import_errors)}"}
    dag = bag.dags[request["dag_id"]]
    from interlock.core.base import scratch

    with scratch.scope():  # the steps' scratch directories (Model.new(), restored checkpoints) end with the run
        dr = dag.test(run_conf=request["conf"])
    states = {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: str(ti.state)
              for ti in dr.get_task_instances()}
    Path(request["result"]).write_text(json.dumps({"state": str(dr.state), "tasks": states}))
    return {"code": 0}


def serve() -> int:
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, _on_stop)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = run(json.loads(line))
        except Exception as exc:  # noqa: BLE001 - told to the parent, which fails the run with it
            answer = {"code": 1, "error": "".join(traceback.format_exception(exc))[-3000:]}
        finally:
            _current.pop("run_dir", None)
        print(DONE + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve())
