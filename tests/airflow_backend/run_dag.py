"""Run one compiled DAG with dag.test() in a fresh interpreter: a deployment's scheduler, in short.

    python run_dag.py DAG_FILE DAG_ID CONF_JSON OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(dag_file: str, dag_id: str, conf: str, out: str) -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=dag_file)
    assert not bag.import_errors, bag.import_errors
    t0 = time.monotonic()
    dr = bag.dags[dag_id].test(run_conf=json.loads(conf))
    took = time.monotonic() - t0
    tis = {ti.task_id: {"state": str(ti.state), "try_number": ti.try_number} for ti in dr.get_task_instances()}
    Path(out).write_text(json.dumps({"state": str(dr.state), "tasks": tis, "seconds": took}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
