"""Run DAGs of the DAGs folder with the real ``dag.test()`` and write what happened as JSON.

Started by the tests in a subprocess whose environment already points AIRFLOW_HOME, the
DAGs folder and the SQLite database at a temporary directory: Airflow's configuration is
process-global, so it never touches the pytest process.

usage: python bridge_driver.py OUT_JSON [DAG_ID ...] [--describe DAG_ID ...]
(runs the first DAGs with dag.test(); only parses and describes those after --describe)
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def run(dag_ids: list[str]) -> dict:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    results: dict = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}}
    for dag_id in dag_ids:
        dag = bag.get_dag(dag_id)
        if dag is None:
            results[dag_id] = {"error": "DAG not found"}
            continue
        try:
            dr = dag.test()
        except Exception:
            results[dag_id] = {"error": traceback.format_exc()}
            continue
        with create_session() as session:
            tis = session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id, TaskInstance.run_id == dr.run_id
                )
            ).all()
            xcoms = session.scalars(
                select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == dr.run_id)
            ).all()
            results[dag_id] = {
                "run_id": dr.run_id,
                "state": str(dr.state),
                "tis": {
                    ti.task_id: {"state": str(ti.state), "try_number": ti.try_number} for ti in tis
                },
                "xcom": {},
            }
            for x in xcoms:
                value = XComModel.deserialize_value(x)
                results[dag_id]["xcom"].setdefault(x.task_id, {})[x.key] = _jsonable(value)
    return results


def describe(dag_ids: list[str]) -> dict:
    """What a DAG file declares, as parsed by Airflow's own DagBag."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    results: dict = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}}
    for dag_id in dag_ids:
        dag = bag.get_dag(dag_id)
        deadlines = (
            dag.deadline
            if isinstance(dag.deadline, list)
            else [dag.deadline]
            if dag.deadline
            else []
        )
        results[dag_id] = {
            "timetable": type(dag.timetable).__name__,
            "expression": getattr(dag.timetable, "expression", None),
            "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs,
            "tags": sorted(dag.tags),
            "deadlines": [
                {
                    "interval_s": d.interval.total_seconds(),
                    "reference": type(d.reference).__name__,
                    "callback": d.callback.path,
                }
                for d in deadlines
            ],
            "tasks": {
                t.task_id: {
                    "upstream": sorted(t.upstream_task_ids),
                    "type": type(t).__name__,
                    "retries": t.retries,
                    "timeout": getattr(t, "timeout", None),
                }
                for t in dag.tasks
            },
        }
    return results


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    split = args.index("--describe") if "--describe" in args else len(args)
    results = run(args[:split])
    results["described"] = describe(args[split + 1 :])
    with open(out, "w") as fh:
        json.dump(results, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
