"""Run DAGs of the DAGs folder with the real ``dag.test()`` and write what happened as JSON.

Started by the tests in a subprocess whose environment already points AIRFLOW_HOME, the
DAGs folder and the SQLite database at a temporary directory: Airflow's configuration is
process-global, so it never touches the pytest process.

usage: python bridge_driver.py OUT_JSON [DAG_ID | PLAN_JSON ...] [--describe DAG_ID ...]
(runs the first DAGs with dag.test(); only parses and describes those after --describe)

A PLAN_JSON argument, ``{"dag_id": ..., "label": ..., "logical_date": ISO, "conf": {...}}``,
runs one DAG run with that logical date and conf, its results stored under ``label``. Two
plans with one logical date share a run id: the second replaces the first, as a clear does.
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


def _plan(arg: str) -> dict:
    if not arg.startswith("{"):
        return {"dag_id": arg, "label": arg}
    plan = json.loads(arg)
    if plan.get("logical_date"):
        from datetime import datetime

        plan["logical_date"] = datetime.fromisoformat(plan["logical_date"])
    return plan


def run(args: list[str]) -> dict:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    results: dict = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}}
    for plan in map(_plan, args):
        dag_id, label = plan["dag_id"], plan["label"]
        dag = bag.get_dag(dag_id)
        if dag is None:
            results[label] = {"error": "DAG not found"}
            continue
        kwargs = {k: plan[k] for k in ("logical_date",) if plan.get(k)}
        if "logical_date" in kwargs:  # the run id is built from run_after: keep it fixed too
            kwargs["run_after"] = kwargs["logical_date"]
        if plan.get("conf") is not None:
            kwargs["run_conf"] = plan["conf"]
        try:
            dr = dag.test(**kwargs)
        except Exception:
            results[label] = {"error": traceback.format_exc()}
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
            results[label] = {
                "run_id": dr.run_id,
                "state": str(dr.state),
                "tis": {
                    ti.task_id: {"state": str(ti.state), "try_number": ti.try_number} for ti in tis
                },
                "xcom": {},
            }
            for x in xcoms:
                value = XComModel.deserialize_value(x)
                results[label]["xcom"].setdefault(x.task_id, {})[x.key] = _jsonable(value)
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
