"""The bridge inside real Airflow: DAG files in a DAGs folder, run with ``dag.test()`` on SQLite.

One subprocess runs every DAG of the group (Airflow starts once); the fake FlyteAdmin
in this process records what the real FlyteRemote asked for. Each test then checks one
scenario: its DAG's outcome in Airflow and its calls on the Flyte side.
"""

from __future__ import annotations

import re
import signal
import time

import pytest
from bridge_fake_admin import SIMPLE, P, Run, k8s_key_ok, k8s_value_ok
from bridge_harness import CLIENT_SECRET, airflow_env, run_driver

SUCCESS_OUTPUTS = {
    "auc": 0.93,
    "model": ("blob", "s3://models/fraud/42"),
    "n_rows": 1200,
    "classes": ["ok", "fraud"],
}
ERRORS = {
    "failed": "step 'train' failed (FATAL): CUDA out of memory; reduce the batch size",
    "timed-out": "workflow exceeded its 2h timeout",
    "aborted": "stopped from the Flyte console: wrong snapshot",
}
GROUP = [
    "il_success",
    "il_fail_failed",
    "il_fail_timed_out",
    "il_fail_aborted",
    "il_reattach_running",
    "il_reattach_succeeded",
    "il_retry_after_failure",
    "il_sync",
    "il_timeout",
    "il_mapped",
    "il_watch",
    "il_kill",  # last: the fixture sends SIGTERM once its execution is being polled
]
NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")


def _setup(admin) -> None:
    train_inputs = {"snapshot": SIMPLE.STRING, "epochs": SIMPLE.INTEGER, "lr": SIMPLE.FLOAT}
    admin.add_launch_plan(
        "lp-success",
        train_inputs,
        [Run([P.QUEUED, P.RUNNING, P.SUCCEEDING, P.SUCCEEDED], SUCCESS_OUTPUTS)],
        versions=("v1", "v2"),
    )
    admin.add_launch_plan("lp-failed", {}, [Run([P.RUNNING, P.FAILED], error=ERRORS["failed"])])
    admin.add_launch_plan(
        "lp-timed-out", {}, [Run([P.RUNNING, P.TIMED_OUT], error=ERRORS["timed-out"])]
    )
    admin.add_launch_plan("lp-aborted", {}, [Run([P.RUNNING, P.ABORTED], error=ERRORS["aborted"])])
    admin.add_launch_plan(
        "lp-reattach",
        {},
        [Run([P.QUEUED, P.RUNNING, P.RUNNING, P.RUNNING, P.SUCCEEDED], {"auc": 0.8})],
    )
    admin.add_launch_plan("lp-reattach-done", {}, [Run([P.RUNNING, P.SUCCEEDED], {"auc": 0.81})])
    admin.add_launch_plan(
        "lp-flaky",
        {},
        [
            Run([P.RUNNING, P.FAILED], error="NCCL timeout"),
            Run([P.RUNNING, P.SUCCEEDED], {"auc": 0.9}),
        ],
    )
    admin.add_launch_plan(
        "lp-sync", {}, [Run([P.RUNNING, P.SUCCEEDED], {"auc": 0.7})], versions=("v1", "v2")
    )
    admin.add_launch_plan("lp-hang", {}, [Run([P.RUNNING])])
    admin.add_launch_plan("lp-kill", {}, [Run([P.RUNNING])])
    admin.seed_execution("watch-ok", "lp-elsewhere", Run([P.RUNNING, P.RUNNING, P.SUCCEEDED]))
    admin.seed_execution(
        "watch-fail", "lp-elsewhere", Run([P.RUNNING, P.RUNNING, P.FAILED], error="bad data")
    )
    admin.seed_execution("watch-poke", "lp-elsewhere", Run([P.QUEUED, P.RUNNING, P.SUCCEEDED]))
    admin.add_launch_plan(
        "lp-mapped", {"snapshot": SIMPLE.STRING}, [Run([P.RUNNING, P.SUCCEEDED], {"auc": 0.5})]
    )


@pytest.fixture(scope="module")
def group(admin_server, make_airflow_home):
    admin, endpoint = admin_server
    _setup(admin)
    home, db = make_airflow_home("group")
    marker = home / "data" / "_SUCCESS"
    marker.parent.mkdir()
    marker.write_text("")
    env = airflow_env(home, endpoint, db)
    env["IL_TEST_MARKER"] = str(marker)
    started = time.monotonic()
    killed: list[str] = []

    def kill_when_polling(proc) -> None:
        """SIGTERM the process running il_kill's task once it polls its execution, as `airflow tasks kill` would."""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if any(e.polls >= 2 for e in admin.executions_of("lp-kill")):
                proc.send_signal(signal.SIGTERM)
                killed.append("sent")
                return
            time.sleep(0.05)

    results, logs = run_driver(
        env,
        home / "results.json",
        [*GROUP, "--describe", "il_nightly", "il_success"],
        while_running=kill_when_polling,
    )
    print(f"dag group ran in {time.monotonic() - started:.1f}s")
    assert killed == ["sent"], "il_kill never started polling its execution"
    return admin, results, logs


def _ti(results, dag_id, task_id):
    return results[dag_id]["tis"][task_id]


def test_dag_files_parse_without_errors(group):
    _, results, _ = group
    assert results["import_errors"] == {}
    for dag_id in GROUP:
        assert "error" not in results[dag_id], results[dag_id].get("error")


def test_success_pushes_outputs_to_xcom_and_downstream_uses_them(group):
    admin, results, _ = group
    run = results["il_success"]
    assert run["state"] == "success"
    assert {t: v["state"] for t, v in run["tis"].items()} == {
        "wait_for_data": "success",
        "run_on_flyte": "success",
        "use_auc": "success",
        "watch": "success",
    }
    xcom = run["xcom"]["run_on_flyte"]
    assert xcom["return_value"] == {
        "auc": 0.93,
        "model": "s3://models/fraud/42",
        "n_rows": 1200,
        "classes": ["ok", "fraud"],
    }
    assert xcom["return_value"]["auc"] * 2 == run["xcom"]["use_auc"]["return_value"]
    (execution,) = admin.executions_of("lp-success")
    assert xcom["flyte_execution_name"] == execution.name
    assert xcom["flyte_execution"]["created"] is True
    assert xcom["flyte_execution"]["url"].endswith(f"/executions/{execution.name}")
    assert xcom["_link_FlyteExecutionLink"] == xcom["flyte_execution"]["url"]  # the UI's button
    # The sensor watched the same execution and, not owning it, never terminated it.
    assert admin.terminated == [] or all(name != execution.name for name, _ in admin.terminated)


def test_templated_inputs_typed_by_the_launch_plan_and_newest_version(group):
    admin, results, _ = group
    (execution,) = admin.executions_of("lp-success")
    run_id = results["il_success"]["run_id"]
    ds = re.search(r"(\d{4}-\d{2}-\d{2})", run_id).group(1)
    # "{{ params.epochs }}" renders to "3"; the launch plan says INTEGER, so it arrives as 3.
    assert execution.inputs == {"snapshot": ds, "epochs": 3, "lr": 0.01}
    assert execution.version == "v2"


def test_labels_are_kubernetes_valid_and_carry_provenance_and_cost_tags(group):
    admin, results, _ = group
    (execution,) = admin.executions_of("lp-success")
    run_id = results["il_success"]["run_id"]
    labels, annotations = execution.labels, execution.annotations
    assert all(k8s_key_ok(k) and k8s_value_ok(v) and len(v) <= 63 for k, v in labels.items())
    assert labels["airflow-dag-id"] == "il_success"  # a user label cannot spoof provenance
    assert labels["airflow-task-id"] == "run_on_flyte"
    # run ids hold ':' and '+', which labels cannot: sanitized, with a hash of the original.
    assert ":" in run_id and labels["airflow-run-id"] != run_id
    assert re.fullmatch(r"[A-Za-z0-9][-A-Za-z0-9_.]*-[0-9a-f]{8}", labels["airflow-run-id"])
    assert labels["team"].startswith("Fraud-Detection")
    assert labels["cost-center"].startswith("ml-42")
    assert annotations["airflow/run-id"] == run_id  # annotations keep the exact value
    assert annotations["owner"] == "fraud team <fraud@example.com>"
    assert annotations["airflow/try-number"] == "1"


def test_execution_names_are_deterministic_flyte_names(group):
    admin, _, _ = group
    names = [e.name for e in admin.created]
    assert names and all(NAME.fullmatch(n) and len(n) <= 20 for n in names)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("phase", ["failed", "timed-out", "aborted"])
def test_terminal_failure_fails_the_task_with_flytes_message(group, phase):
    admin, results, logs = group
    dag_id = f"il_fail_{phase.replace('-', '_')}"
    run = results[dag_id]
    assert run["state"] == "failed"
    ti = _ti(results, dag_id, "run_on_flyte")
    assert ti["state"] == "failed"
    (execution,) = admin.executions_of(f"lp-{phase}")
    flyte_phase = {"failed": "FAILED", "timed-out": "TIMED_OUT", "aborted": "ABORTED"}[phase]
    assert f"Flyte execution ml/development/{execution.name} ended {flyte_phase}: " in logs
    assert ERRORS[phase] in logs
    assert run["xcom"]["run_on_flyte"]["flyte_execution_name"] == execution.name


def test_aborted_on_the_flyte_side_is_not_retried(group):
    admin, results, _ = group
    # The DAG allows one retry; an abort is deliberate, so the task fails for good.
    assert _ti(results, "il_fail_aborted", "run_on_flyte")["try_number"] == 1
    assert len(admin.executions_of("lp-aborted")) == 1


def test_retry_reattaches_to_the_running_execution(group):
    admin, results, logs = group
    ti = _ti(results, "il_reattach_running", "train")
    assert ti == {"state": "success", "try_number": 2}
    assert "simulated worker loss after launch" in logs
    (execution,) = admin.executions_of("lp-reattach")  # exactly one execution created
    xcom = results["il_reattach_running"]["xcom"]["train"]
    assert xcom["flyte_execution_name"] == execution.name
    assert xcom["flyte_execution"]["created"] is False  # try 2 re-attached
    assert xcom["return_value"] == {"auc": 0.8}


def test_retry_reattaches_to_the_succeeded_execution(group):
    admin, results, logs = group
    ti = _ti(results, "il_reattach_succeeded", "train")
    assert ti == {"state": "success", "try_number": 2}
    assert "simulated worker loss on resume" in logs
    assert len(admin.executions_of("lp-reattach-done")) == 1
    assert results["il_reattach_succeeded"]["xcom"]["train"]["return_value"] == {"auc": 0.81}


def test_retry_after_a_failed_execution_launches_a_new_one(group):
    admin, results, logs = group
    ti = _ti(results, "il_retry_after_failure", "train")
    assert ti == {"state": "success", "try_number": 2}
    first, second = admin.executions_of("lp-flaky")
    assert first.name != second.name and first.name[:-1] == second.name[:-1]
    assert (first.name[-2:], second.name[-2:]) == ("-0", "-1")
    assert "NCCL timeout" in logs
    xcom = results["il_retry_after_failure"]["xcom"]["train"]
    assert xcom["flyte_execution_name"] == second.name
    assert xcom["flyte_execution"]["generation"] == 1
    assert xcom["return_value"] == {"auc": 0.9}


def test_waiting_in_the_worker_with_a_pinned_version(group):
    admin, results, _ = group
    assert _ti(results, "il_sync", "train")["state"] == "success"
    (execution,) = admin.executions_of("lp-sync")
    assert execution.version == "v1"
    assert results["il_sync"]["xcom"]["train"]["return_value"] == {"auc": 0.7}


def test_mapped_task_instances_get_one_execution_each(group):
    admin, results, _ = group
    executions = admin.executions_of("lp-mapped")
    assert sorted(e.inputs["snapshot"] for e in executions) == ["2026-11-01", "2026-11-02"]
    assert len({e.name for e in executions}) == 2
    assert sorted(e.annotations["airflow/map-index"] for e in executions) == ["0", "1"]
    assert results["il_mapped"]["state"] == "success"


def test_sensor_waits_for_executions_started_elsewhere(group):
    admin, results, logs = group
    states = {t: v["state"] for t, v in results["il_watch"]["tis"].items()}
    assert states == {"watch_ok": "success", "watch_fail": "failed", "watch_poke": "success"}
    assert "Flyte execution watch-fail ended FAILED: bad data" in logs
    # Deferred (the first poke saw RUNNING), then polled by the trigger to the end.
    assert admin.executions["ml", "development", "watch-ok"].polls >= 3
    assert not {n for n, _ in admin.terminated} & {"watch-ok", "watch-fail", "watch-poke"}


def test_timeout_terminates_the_execution_and_fails(group):
    admin, results, logs = group
    assert _ti(results, "il_timeout", "train")["state"] == "failed"
    (execution,) = admin.executions_of("lp-hang")
    assert (execution.name, "Airflow timeout reached while waiting") in admin.terminated
    assert "did not finish in 0.5s" in logs


def test_dag_factory_schedule_catchup_sla_and_sensors(group):
    _, results, _ = group
    nightly = results["described"]["il_nightly"]
    assert nightly["timetable"] == "CronTriggerTimetable" and nightly["expression"] == "0 3 * * *"
    assert nightly["catchup"] is True and nightly["max_active_runs"] == 1
    assert nightly["tags"] == ["flyte", "fraud", "interlock"]
    assert nightly["deadlines"] == [
        {
            "interval_s": 6 * 3600.0,
            "reference": "DagRunQueuedAtDeadline",
            "callback": "interlock.plugins.airflow.dag_factory.log_missed_deadline",
        }
    ]
    launch = nightly["tasks"]["run_on_flyte"]
    assert launch["type"] == "FlyteLaunchPlanOperator"
    assert launch["upstream"] == ["wait_features", "wait_labels"]  # sensors given as instances
    assert launch["retries"] == 2 and launch["timeout"] == 8 * 3600.0
    success = results["described"]["il_success"]
    assert success["tasks"]["run_on_flyte"]["upstream"] == [
        "wait_for_data"
    ]  # sensor given as a callable
    assert success["catchup"] is False and success["deadlines"] == []


def test_client_credentials_are_exchanged_for_a_token_and_never_logged(group):
    admin, _, logs = group
    tokens = admin.served.tokens
    assert tokens.requests, "the remote never asked the identity provider for a token"
    assert all(
        r["authorized"] and r["body"]["grant_type"] == ["client_credentials"]
        for r in tokens.requests
    )
    assert (
        admin.calls["CreateExecution"] >= len(admin.created) > 0
    )  # calls got past the bearer check
    assert CLIENT_SECRET not in logs


def test_killing_the_task_terminates_the_execution(group):
    """SIGTERM to the process running the task: Airflow calls on_kill -> TerminateExecution."""
    admin, results, _ = group
    (execution,) = admin.executions_of("lp-kill")
    assert admin.terminated.count((execution.name, "Airflow task was killed")) == 1
    assert results["il_kill"]["tis"]["train"]["state"] == "failed"
