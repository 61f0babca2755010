"""Airflow compile: the pipeline's triggers are the DAG's schedule as an Airflow user writes it,
read back from a real DagBag (in a fresh interpreter, as the scheduler parses); a triggered
run's params carry the trigger's inputs, time and data URI; what one DAG cannot hold is refused
at compile naming the trigger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_airflow_dags import parse

import interlock as il
from interlock.adapters.airflow.schedule import TRIGGER_TEMPLATE, env_params, run_params
from interlock.core.base.errors import CapabilityError

pytest.importorskip("airflow")


@il.step
def echo(snapshot: str, mode: str) -> str:
    return snapshot + mode


def _pipeline(*triggers: object, name: str = "af-trig") -> il.PipelineSpec:
    @il.pipeline(name=name, triggers=list(triggers))
    def af_trig(snapshot: str = "s0", mode: str = "refresh", as_of: str = "") -> str:
        return echo(snapshot=snapshot, mode=mode)

    return il.spec(af_trig)


def test_each_trigger_shape_is_the_dags_schedule_in_a_dagbag(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    specs = [
        _pipeline(il.Cron("0 6 * * 1", tz="Europe/Berlin", max_concurrent=2), name="af-cron"),
        _pipeline(il.Cron("0 3 * * *", tz="Europe/Berlin"), il.Cron("0 15 * * *", tz="Europe/Berlin"),
                  name="af-crons"),
        _pipeline(il.Every("6h", start="2026-01-01T00:00:00+00:00", catch_up=True), name="af-every"),
        _pipeline(il.OnData("s3://b/snap/", uri_input="snapshot", active=False), name="af-data"),
        _pipeline(il.Cron("@daily"), il.OnData("/data/snap", uri_input="snapshot"), name="af-both"),
    ]
    for spec in specs:
        il.compile(spec, backend="airflow", out=dags, operator="taskflow")
    parsed = parse(dags, tmp_path)
    assert parsed["errors"] == {} and parsed["modules"] == []
    t = {name: d["timetable"] for name, d in parsed["dags"].items()}
    want = {"class": "CronTriggerTimetable", "crons": ["0 6 * * 1"], "timezones": ["Europe/Berlin"],
            "catchup": False, "max_active_runs": 2, "paused": False}
    assert {k: t["af-cron"][k] for k in want} == want
    assert t["af-crons"]["class"] == "MultipleCronTriggerTimetable"
    assert t["af-crons"]["crons"] == ["0 3 * * *", "0 15 * * *"] and t["af-crons"]["timezones"] == ["Europe/Berlin"]
    assert (t["af-every"]["class"], t["af-every"]["delta"]) == ("DeltaTriggerTimetable", 21600.0)
    assert t["af-every"]["catchup"] is True and t["af-every"]["start_date"] == "2026-01-01T00:00:00+00:00"
    assert t["af-data"]["class"] == "AssetTriggeredTimetable" and t["af-data"]["assets"] == ["s3://b/snap"]
    assert t["af-data"]["paused"] is True
    assert t["af-both"]["class"] == "AssetOrTimeSchedule" and t["af-both"]["time"] == "CronTriggerTimetable"
    assert t["af-both"]["assets"] == ["file:///data/snap"] and t["af-both"]["crons"] == ["0 0 * * *"]  # Airflow's @daily


def test_an_unscheduled_compile_and_a_pipeline_without_triggers_have_no_schedule(tmp_path: Path) -> None:
    il.compile(_pipeline(il.Cron("@daily"), name="af-off"), backend="airflow", out=tmp_path / "dags",
               operator="taskflow", schedule=False)  # airflow-local's form: dag.test() runs it once
    il.compile(_pipeline(name="af-none"), backend="airflow", out=tmp_path / "dags", operator="taskflow")
    dags = parse(tmp_path / "dags", tmp_path)["dags"]
    assert {n: d["schedule"] for n, d in dags.items()} == {"af-off": None, "af-none": None}


def test_a_scheduled_run_gets_the_trigger_inputs_and_its_time_in_the_crons_zone() -> None:
    spec = _pipeline(il.Cron("0 6 * * 1", tz="Europe/Berlin", inputs={"mode": "tune"}, time_input="as_of"),
                     il.OnData("s3://b/snap/", uri_input="snapshot", inputs={"mode": "refresh"}))
    defaults = {"snapshot": "s0", "mode": "refresh", "as_of": ""}
    when = datetime(2026, 12, 7, 5, 0, tzinfo=UTC)
    assert run_params(spec, defaults, "scheduled", when, []) == {
        "snapshot": "s0", "mode": "tune", "as_of": "2026-12-07T06:00:00+01:00"}
    events = [("s3://b/snap", {"uri": "s3://b/snap/2026-12-01.parquet"}), ("s3://b/snap", {})]
    assert run_params(spec, defaults, "asset_triggered", None, events[:1])["snapshot"] == \
        "s3://b/snap/2026-12-01.parquet"
    assert run_params(spec, defaults, "asset_triggered", None, events)["snapshot"] == "s3://b/snap"  # no extra: the asset
    assert run_params(spec, {**defaults, "mode": "x"}, "manual", when, events) == {**defaults, "mode": "x"}


def test_a_pods_trigger_template_renders_to_what_the_entry_reads() -> None:
    from types import SimpleNamespace

    from airflow.sdk.definitions._internal.templater import (
        SandboxedEnvironment,  # what renders a task's fields
    )
    from airflow.utils.types import DagRunType

    spec = _pipeline(il.OnData("s3://b/snap/", uri_input="snapshot"), name="af-pod")
    event = SimpleNamespace(asset=SimpleNamespace(uri="s3://b/snap"), extra={"uri": "s3://b/snap/new.parquet"},
                            timestamp=datetime(2026, 12, 1, tzinfo=UTC))
    text = SandboxedEnvironment().from_string(TRIGGER_TEMPLATE).render(
        dag_run=SimpleNamespace(run_type=DagRunType.ASSET_TRIGGERED), logical_date=None,
        triggering_asset_events={"s3://b/snap": [event]})
    assert json.loads(text)["events"][-1] is None
    assert env_params(spec, {"snapshot": "s0"}, text) == {"snapshot": "s3://b/snap/new.parquet"}
    assert env_params(spec, {"snapshot": "s0"}, None) == {"snapshot": "s0"}
    timed = _pipeline(il.Cron("0 6 * * *", tz="Europe/Berlin", time_input="as_of"), name="af-pod-cron")
    text = SandboxedEnvironment().from_string(TRIGGER_TEMPLATE).render(
        dag_run=SimpleNamespace(run_type=DagRunType.SCHEDULED), logical_date=datetime(2026, 7, 1, 4, tzinfo=UTC),
        triggering_asset_events={})
    assert env_params(timed, {"as_of": ""}, text) == {"as_of": "2026-07-01T06:00:00+02:00"}  # summer time


@pytest.mark.parametrize(("triggers", "message", "step"), [
    ((il.Cron("@daily", inputs={"mode": "tune"}), il.Cron("@hourly")), "one set of params for a scheduled run",
     "cron-0"),
    ((il.Cron("@daily", tz="Europe/Berlin"), il.Cron("@hourly")), "one time zone for its crons", "cron-0"),
    ((il.Cron("@daily"), il.Every("6h")), "one timetable", "every-1"),
    ((il.Cron("@daily"), il.OnData("/d", uri_input="snapshot", active=False)), "one paused state", "cron-0"),
    ((il.Every("6h"), il.Every("1h")), "one DeltaTriggerTimetable", "every-1"),
])
def test_triggers_one_dag_cannot_hold_are_refused_at_compile(tmp_path: Path, triggers: tuple[object, ...],
                                                             message: str, step: str) -> None:
    with pytest.raises(CapabilityError, match=message) as err:
        il.compile(_pipeline(*triggers), backend="airflow", out=tmp_path)
    assert err.value.step == step and "one pipeline per trigger" in (err.value.hint or "")
    assert not list(tmp_path.iterdir())


def test_a_drift_trigger_is_refused_by_the_capability_check(tmp_path: Path) -> None:
    with pytest.raises(CapabilityError, match=r"cannot express 'trigger.drift' \(used by drift-0\).*"
                       r"interlock watch FILE --backend airflow-local"):
        il.compile(_pipeline(il.OnDrift("s3://b/snap/", model="fraud")), backend="airflow", out=tmp_path)
