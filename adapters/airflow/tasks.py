"""The bodies of the TaskFlow tasks (operator ``taskflow``; gate tasks in both forms): each runs
one node of the compiled spec through the runtime shim (``worker.py``) in the Airflow worker.

The loader references these functions when the scheduler parses the DAG file, so this module
imports nothing of interlock at import: the spec, the shim and the core load when a task runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_SPECS: dict[str, tuple[float, Any, dict[str, Any]]] = {}


def compiled(spec_file: str) -> tuple[Any, dict[str, Any]]:
    """The spec (a ``PipelineSpec``) and the compile options in a sidecar file, read once per
    change of the file."""
    mtime = os.stat(spec_file).st_mtime
    held = _SPECS.get(spec_file)
    if held is None or held[0] != mtime:
        from interlock.core.model.pipeline_spec import PipelineSpec

        doc = json.loads(Path(spec_file).read_text())
        held = (mtime, PipelineSpec.from_json(doc["spec"]), doc.get("options", {}))
        _SPECS[spec_file] = held
    return held[1], held[2]


def _worker(spec_file: str) -> Any:
    from airflow.sdk import get_current_context

    from .names import RunPlace
    from .schedule import context_params
    from .worker import Worker

    spec, options = compiled(spec_file)
    ctx = get_current_context()
    return Worker(spec, RunPlace.here(options, ctx["run_id"]), context_params(spec, ctx))


def _airflow_outcome(fn: Any) -> Any:
    """What the worker decided, said to Airflow: a node that does not start is a skipped task, a
    failed or stopped node a failed task that Airflow does not retry (the shim decided)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from .worker import Failed, Skip

    try:
        return fn()
    except Skip as skip:
        raise AirflowSkipException(f"{skip.status}: {skip.why}") from None
    except Failed as failed:
        if failed.retry_delay is not None:  # retries="airflow": ShimRetryPolicy waits the step's backoff
            from .retry_policy import StepRetry

            raise StepRetry(failed.kind, failed.detail, failed.retry_delay) from failed.__cause__
        raise AirflowFailException(f"the step {failed}; see its interlock fragment") from failed.__cause__


def run_step(spec_file: str, node: str) -> str:
    return _airflow_outcome(lambda: _worker(spec_file).step_task(node))


def map_items(spec_file: str, node: str) -> list[int]:
    return _airflow_outcome(lambda: _worker(spec_file).map_items(node))


def map_pod_args(spec_file: str, node: str) -> list[list[str]]:
    """The item indices as the pods' entry arguments (KubernetesPodOperator expands over them)."""
    return [["item", node, str(i)] for i in map_items(spec_file, node)]


def map_item(spec_file: str, node: str, index: int) -> str:
    return _airflow_outcome(lambda: _worker(spec_file).map_item(node, index))


def map_collect(spec_file: str, node: str) -> str:
    return _airflow_outcome(lambda: _worker(spec_file).map_collect(node))


def run_finally(spec_file: str, node: str) -> None:
    return _airflow_outcome(lambda: _worker(spec_file).finally_task(node))


def gate_holds(spec_file: str, gate: str) -> bool:
    return bool(_worker(spec_file).gate_holds(gate))
