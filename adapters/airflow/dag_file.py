"""Compile: a DAG file an Airflow 3 scheduler parses, and the compiled spec beside it.

The DAG file holds no pipeline code: it calls interlock's loader (``loader.py``), which reads
the DAG description rendered here (``describe.py``) from ``<name>.interlock.json`` and makes
the tasks; the same sidecar holds the spec and the compile options the tasks read when they
run. Deploy both files into the DAGs folder, and an image with interlock and the pipeline's
code for the pods.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from interlock.core.model.pipeline_spec import PipelineSpec

from .describe import describe
from .loader import SPEC_SUFFIX
from .options import AirflowOptions
from .schedule import plan

TEMPLATE = '''"""Airflow DAG {dag_id!r}: interlock pipeline {pipeline!r}, compiled by `interlock compile --backend airflow`.

Generated: edit the pipeline and compile again. The tasks come from {spec_file} (the compiled
spec and the DAG's description); parsing imports Airflow and interlock's loader only.
"""

from interlock.adapters.airflow.loader import load_dag

dag = load_dag(__file__)
'''


def dag_path(spec: PipelineSpec, out: Path) -> Path:
    return out if out.suffix == ".py" else out / f"{spec.name.replace('-', '_')}.py"


def write_dag(spec: PipelineSpec, out: Path, options: AirflowOptions) -> list[Path]:
    if options.schedule:
        plan(spec)  # triggers one DAG cannot hold are refused here, not when the scheduler parses the file
    path = dag_path(spec, Path(out))
    path.parent.mkdir(parents=True, exist_ok=True)
    sidecar = path.with_suffix(SPEC_SUFFIX)
    opts = dataclasses.asdict(options)
    doc = {"dag": describe(spec, opts), "spec": spec.to_json(), "options": opts}
    sidecar.write_text(json.dumps(doc, indent=1))
    path.write_text(TEMPLATE.format(dag_id=options.dag_id or spec.name, pipeline=spec.name, spec_file=sidecar.name))
    return [path, sidecar]
