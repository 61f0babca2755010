"""Join rules and il.Skip in the deployment form (``interlock compile --backend airflow``, not
serial): Airflow's own trigger rules and AirflowSkipException decide, run for real with
``dag.test()`` in a fresh interpreter; the task states are those the local backend settles."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("airflow")

from conformance import join_pipelines as jp  # noqa: E402
from test_airflow_retries import run_deployed  # noqa: E402

import interlock as il  # noqa: E402

AIRFLOW_STATE = {"succeeded": "success", "skipped": "skipped", "not-run": "upstream_failed", "failed": "failed"}


def _states(result: dict, nodes: list[str]) -> dict[str, str]:
    return {n: result["tasks"][n]["state"].rpartition(".")[2].lower() for n in nodes}


@pytest.mark.parametrize(("pipeline", "params"), [(jp.join_rules, {"x": -1}), (jp.self_skip, {"x": 9}),
                                                  (jp.join_failed, {})], ids=["after-a-block", "self-skip", "failed"])
def test_the_trigger_rules_settle_each_join_as_local_does(tmp_path: Path, pipeline, params: dict) -> None:
    local = il.run(pipeline, backend="local", workdir=tmp_path / "local", raise_on_failure=False, **params)
    want = {n: AIRFLOW_STATE[str(s.status)] for n, s in local.steps.items()}
    result, _ = run_deployed(pipeline, tmp_path / "deployed", None, conf=params)
    assert _states(result, list(want)) == want
