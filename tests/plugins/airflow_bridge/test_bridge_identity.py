"""The bridge re-attaches only to what it would launch now (real Airflow, dag.test()).

Clearing a task after the upstream data changed, or after a new launch plan version, must
launch anew instead of returning the old execution's outputs; two deployments (staging,
prod) with the same DAG and task ids must never adopt each other's executions; and an
execution someone else created under the derived name is refused, not adopted.

One logical date for every run: each run of a DAG replaces the previous one under the
same run id, as a clear does (dag.test() deletes and recreates the DAG run).
"""

from __future__ import annotations

import json
import re

import pytest
from bridge_fake_admin import SIMPLE, P, Run
from bridge_harness import airflow_env, run_driver

DAY = "2026-11-01T00:00:00+00:00"
NAME = re.compile(r"^af[0-9a-f]{14}-\d{1,3}$")


def _plan(dag_id: str, label: str, **conf) -> str:
    return json.dumps({"dag_id": dag_id, "label": label, "logical_date": DAY, "conf": conf})


def _deployment_env(make_airflow_home, endpoint: str, name: str) -> tuple[dict, object]:
    home, db = make_airflow_home(f"deploy-{name}")
    env = airflow_env(home, endpoint, db)
    conn = json.loads(env["AIRFLOW_CONN_FLYTE_DEFAULT"])
    conn["extra"]["namespace"] = name  # this deployment's name, in its Flyte connection
    env["AIRFLOW_CONN_FLYTE_DEFAULT"] = json.dumps(conn)
    return env, home


@pytest.fixture(scope="module")
def runs(admin_server, make_airflow_home):
    admin, endpoint = admin_server
    done = [P.RUNNING, P.SUCCEEDED]
    admin.add_launch_plan(
        "lp-inputs",
        {"snapshot": SIMPLE.STRING},
        [Run(done, {"auc": 0.61}), Run(done, {"auc": 0.62}), Run(done, {"auc": 0.63})],
    )
    admin.add_launch_plan(
        "lp-versions", {}, [Run(done, {"auc": 0.71}), Run(done, {"auc": 0.72})], versions=("v1", "v2")
    )
    admin.add_launch_plan(
        "lp-deploy", {"snapshot": SIMPLE.STRING}, [Run(done, {"auc": 0.81}), Run(done, {"auc": 0.82})]
    )
    admin.add_launch_plan("lp-deploy-arg", {}, [Run(done, {"auc": 0.9})])
    admin.add_launch_plan("lp-foreign", {"snapshot": SIMPLE.STRING}, [Run([P.RUNNING])])

    staging, staging_home = _deployment_env(make_airflow_home, endpoint, "staging")
    results, logs = run_driver(
        staging,
        staging_home / "results.json",
        [
            _plan("il_inputs_change", "first", snapshot="2026-11-01"),
            _plan("il_inputs_change", "changed", snapshot="2026-11-02"),  # upstream data changed
            _plan("il_inputs_change", "back", snapshot="2026-11-01"),
            _plan("il_version_change", "v1", version="v1"),
            _plan("il_version_change", "v2", version="v2"),  # a new version registered and pinned
            _plan("il_deploy", "staging"),
            _plan("il_deploy_arg", "canary"),
            _plan("il_foreign", "foreign"),
        ],
    )
    prod, prod_home = _deployment_env(make_airflow_home, endpoint, "prod")
    prod_results, prod_logs = run_driver(prod, prod_home / "results.json", [_plan("il_deploy", "prod")])
    results["prod"] = prod_results["prod"]
    assert results["import_errors"] == {} and prod_results["import_errors"] == {}
    return admin, results, logs + prod_logs


def _launch(results, label) -> dict:
    run = results[label]
    assert "error" not in run, run.get("error")
    return run["xcom"]["train"]


def test_a_clear_after_the_inputs_changed_launches_on_the_new_inputs(runs):
    admin, results, _ = runs
    first, changed, back = (_launch(results, k) for k in ("first", "changed", "back"))
    assert results["first"]["run_id"] == results["changed"]["run_id"] == results["back"]["run_id"]
    executions = admin.executions_of("lp-inputs")
    assert [e.inputs for e in executions] == [{"snapshot": "2026-11-01"}, {"snapshot": "2026-11-02"}]
    assert changed["flyte_execution"]["created"] is True
    assert changed["flyte_execution_name"] == executions[1].name != first["flyte_execution_name"]
    assert changed["return_value"] == {"auc": 0.62}  # not the old execution's outputs
    # The same inputs again: the execution that ran them is found, nothing is relaunched.
    assert back["flyte_execution"]["created"] is False
    assert back["flyte_execution_name"] == first["flyte_execution_name"] == executions[0].name
    assert back["return_value"] == first["return_value"] == {"auc": 0.61}


def test_a_new_launch_plan_version_launches_anew(runs):
    admin, results, _ = runs
    v1, v2 = _launch(results, "v1"), _launch(results, "v2")
    assert [e.version for e in admin.executions_of("lp-versions")] == ["v1", "v2"]
    assert v2["flyte_execution"]["created"] is True
    assert v2["flyte_execution"]["launch_plan_version"] == "v2"
    assert v2["flyte_execution_name"] != v1["flyte_execution_name"]
    assert v2["return_value"] == {"auc": 0.72}


def test_two_deployments_never_adopt_each_others_executions(runs):
    admin, results, _ = runs
    staging, prod = _launch(results, "staging"), _launch(results, "prod")
    assert results["staging"]["run_id"] == results["prod"]["run_id"]  # same DAG, task, run id
    executions = admin.executions_of("lp-deploy")
    assert len(executions) == 2
    assert staging["flyte_execution"]["created"] is prod["flyte_execution"]["created"] is True
    assert {staging["flyte_execution_name"], prod["flyte_execution_name"]} == {e.name for e in executions}
    assert [e.labels["airflow-namespace"] for e in executions] == ["staging", "prod"]
    assert (staging["flyte_execution"]["namespace"], prod["flyte_execution"]["namespace"]) == ("staging", "prod")
    assert (staging["return_value"], prod["return_value"]) == ({"auc": 0.81}, {"auc": 0.82})


def test_the_operators_namespace_wins_over_the_connections(runs):
    admin, results, _ = runs
    (execution,) = admin.executions_of("lp-deploy-arg")
    assert execution.labels["airflow-namespace"] == "canary"
    assert _launch(results, "canary")["flyte_execution"]["namespace"] == "canary"


def test_an_execution_launched_by_someone_else_under_the_name_is_refused(runs):
    admin, results, logs = runs
    run = results["foreign"]
    assert run["state"] == "failed"
    # Deterministic: the one retry the DAG allows is not used.
    assert run["tis"]["train"] == {"state": "failed", "try_number": 1}
    (forged,) = admin.executions_of("lp-foreign")  # nothing else was launched
    assert forged.inputs == {"snapshot": "forged"}
    assert f"Flyte execution ml/development/{forged.name} exists but was not launched for this task" in logs
    assert "input 'snapshot' is 'forged' there, '2026-11-01' in this task" in logs
    assert "Refusing to re-attach" in logs and "namespace" in logs
    assert "flyte_execution_name" not in run["xcom"].get("train", {})


def test_names_stay_valid_flyte_names(runs):
    admin, _, _ = runs
    assert all(NAME.fullmatch(e.name) and len(e.name) <= 20 for e in admin.created)
