"""The trigger serialized in one process and run by Airflow's TriggerRunner in another.

``dag.test()`` runs triggers inline, in the task's own process; a real deployment
serializes the trigger (classpath + kwargs), stores it encrypted and rebuilds it in the
triggerer. These tests take that path across two processes against the fake FlyteAdmin.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bridge_fake_admin import P, Run
from bridge_harness import HERE, airflow_env

SCRIPT = HERE / "bridge_trigger_process.py"
KILL_CAUSE = "Airflow task was killed while waiting"


def _trigger(name: str, **extra) -> dict:
    return {
        "execution_name": name,
        "project": "ml",
        "domain": "development",
        "poll_interval": 0.05,
        **extra,
    }


SPEC = [
    {"trigger": _trigger("trig-ok"), "action": "complete"},
    {"trigger": _trigger("trig-fail"), "action": "complete"},
    {"trigger": _trigger("trig-kill"), "action": "user_kill"},
    {"trigger": _trigger("trig-restart"), "action": "shutdown"},
    {"trigger": _trigger("trig-deadline"), "action": "complete", "deadline_in": 0.4},
    {
        "trigger": _trigger("trig-watch", owns_execution=False),
        "action": "complete",
        "deadline_in": 0.4,
    },
]


@pytest.fixture(scope="module")
def triggered(admin_server, make_airflow_home):
    admin, endpoint = admin_server
    admin.seed_execution("trig-ok", "lp", Run([P.RUNNING, P.RUNNING, P.SUCCEEDED], {"auc": 1.0}))
    admin.seed_execution(
        "trig-fail", "lp", Run([P.RUNNING, P.FAILED], error="Xid 79: GPU fell off the bus")
    )
    for name in ("trig-kill", "trig-restart", "trig-deadline", "trig-watch"):
        admin.seed_execution(name, "lp", Run([P.RUNNING]))
    admin.add_launch_plan("lp-race", {}, [Run([P.RUNNING])])
    home, db = make_airflow_home("triggerer")
    env = airflow_env(home, endpoint, db)
    wire, out = home / "wire.json", home / "out.json"
    spec = json.dumps(SPEC)
    for args in (["worker", str(wire), spec], ["triggerer", str(wire), str(out), spec]):
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    result = json.loads(out.read_text())
    assert result["failed"] == []
    result["hook"] = json.loads((home / "wire.json.hook.json").read_text())
    return admin, {r["name"]: r for r in result["results"]}, result


def test_a_lost_launch_race_shares_one_execution(triggered):
    admin, _, result = triggered
    hook = result["hook"]
    assert (hook["first_created"], hook["second_created"]) == (True, False)  # ALREADY_EXISTS
    assert hook["again"] == [hook["name"], False]  # a later try re-attaches
    assert [e.name for e in admin.executions_of("lp-race")] == [hook["name"]]
    assert hook["test_connection"][0] is True


def test_trigger_serializes_to_its_classpath_and_plain_kwargs(triggered):
    _, _, result = triggered
    wire = result["wire"]
    assert {w["classpath"] for w in wire} == {
        "interlock.plugins.airflow.triggers.FlyteExecutionTrigger"
    }
    kwargs = wire[0]["kwargs"]
    assert kwargs["execution_name"] == "trig-ok" and kwargs["flyte_conn_id"] == "flyte_default"
    json.dumps(wire)  # nothing but JSON crosses the process boundary


def test_success_event_after_the_execution_succeeds(triggered):
    admin, results, _ = triggered
    assert results["trig-ok"]["outcome"] == "finished"
    assert results["trig-ok"]["events"] == [
        {
            "status": "success",
            "execution": {"project": "ml", "domain": "development", "name": "trig-ok"},
            "phase": "SUCCEEDED",
            "message": None,
        }
    ]
    assert admin.executions["ml", "development", "trig-ok"].polls >= 3


def test_failure_event_carries_flytes_message(triggered):
    _, results, _ = triggered
    (event,) = results["trig-fail"]["events"]
    assert (event["status"], event["phase"], event["message"]) == (
        "failed",
        "FAILED",
        "Xid 79: GPU fell off the bus",
    )


def test_user_kill_terminates_the_execution(triggered):
    admin, results, _ = triggered
    assert results["trig-kill"] == {"name": "trig-kill", "outcome": "cancelled", "events": []}
    assert admin.terminated.count(("trig-kill", KILL_CAUSE)) == 1


def test_triggerer_shutdown_leaves_the_execution_running(triggered):
    """A plain cancel means the trigger moves to another triggerer: the GPU run must go on."""
    admin, results, _ = triggered
    assert results["trig-restart"]["outcome"] == "cancelled"
    assert all(name != "trig-restart" for name, _ in admin.terminated)
    assert admin.executions["ml", "development", "trig-restart"].phase == P.RUNNING


def test_deadline_terminates_an_owned_execution_but_not_a_watched_one(triggered):
    admin, results, _ = triggered
    (owned,) = results["trig-deadline"]["events"]
    (watched,) = results["trig-watch"]["events"]
    assert owned["status"] == watched["status"] == "timeout"
    assert ("trig-deadline", "Airflow timeout reached while waiting") in admin.terminated
    assert all(name != "trig-watch" for name, _ in admin.terminated)
