"""What an MLflow store holds for an experiment, as JSON, read in its own process:
``python -m conformance.mlflow_probe STORE EXPERIMENT``. The tests that drive `interlock run`
read MLflow through it, so that MLflow's logging setup stays out of the test process."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from interlock.plugins.mlflow.tracker import registry_at


def probe(store: str, experiment: str) -> list[dict]:
    client = registry_at(store).client
    exp = client.get_experiment_by_name(experiment)
    out = []
    for run in client.search_runs([exp.experiment_id], "tags.`interlock.kind` = 'pipeline'"):
        children = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
        with tempfile.TemporaryDirectory() as tmp:
            receipt = json.loads(Path(client.download_artifacts(run.info.run_id, "receipt.json", tmp)).read_text())
        out.append({"run_id": run.info.run_id, "params": dict(run.data.params), "tags": dict(run.data.tags),
                    "children": sorted(c.data.tags["interlock.node"] for c in children), "receipt": receipt})
    return out


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1], sys.argv[2])))
