"""The task entry of a KubernetesPodOperator pod: run one node of the compiled spec.

    python -m interlock.adapters.airflow.entry step|finally NODE
    python -m interlock.adapters.airflow.entry item NODE INDEX

The pipeline's reference (the spec is rebuilt from it in the image, as on Argo and Flyte), the
step's compiled fingerprint, the compile options, the DAG run's params and Airflow's run id
arrive as env vars (``pod.py``). Exit 0: the node ran; SKIP_EXIT: it does not start (Airflow marks the task
skipped); 1: it failed or was stopped (the shim decided: Airflow does not retry it).
"""

from __future__ import annotations

import json
import os
import sys

from interlock.core.model.refs import load_spec

from .names import RunPlace
from .pod import DAG_RUN_ENV, FINGERPRINT_ENV, OPTIONS_ENV, PARAMS_ENV, PIPELINE_ENV, SKIP_EXIT
from .schedule import TRIGGER_ENV, env_params
from .worker import Failed, Skip, Worker


def main(argv: list[str]) -> int:
    kind, node = argv[0], argv[1]
    spec = load_spec(os.environ[PIPELINE_ENV])
    step = spec.step_of(node)
    compiled = os.environ.get(FINGERPRINT_ENV)
    if compiled and step.fingerprint != compiled:
        print(f"interlock: the code of step {step.name!r} in this image differs from the compiled DAG "
              f"(fingerprint {step.fingerprint[:12]} != {compiled[:12]}); rebuild the image and compile again",
              file=sys.stderr)
        return 1
    options = json.loads(os.environ.get(OPTIONS_ENV) or "{}")
    params = env_params(spec, json.loads(os.environ.get(PARAMS_ENV) or "{}"), os.environ.get(TRIGGER_ENV))
    worker = Worker(spec, RunPlace.here(options, os.environ[DAG_RUN_ENV]), params)
    try:
        if kind == "item":
            worker.map_item(node, int(argv[2]))
        elif kind == "finally":
            worker.finally_task(node)
        else:
            worker.step_task(node)
    except Skip as skip:
        print(f"interlock: {node} {skip.status}: {skip.why}", file=sys.stderr)
        return SKIP_EXIT
    except Failed as failed:
        print(f"interlock: {node} {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
