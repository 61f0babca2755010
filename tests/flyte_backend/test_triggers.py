"""Flyte 1 compile: each time trigger is a launch plan of its own, as a Flyte user writes it
(CronSchedule / FixedRate, fixed inputs, a concurrency policy), read back from the protobufs;
what Flyte 1 cannot hold is refused at compile naming the trigger."""

from __future__ import annotations

from pathlib import Path

import pytest
from flyteidl.admin import launch_plan_pb2

import interlock as il
from interlock.adapters.flyte.compile import launch_plans
from interlock.adapters.flyte.workflow import build_entities
from interlock.core.base.errors import CapabilityError


@il.step
def echo(snapshot: str, mode: str) -> str:
    return snapshot + mode


def _pipeline(*triggers: object) -> il.PipelineSpec:
    @il.pipeline(name="trig", triggers=list(triggers))
    def trig(snapshot: str = "s0", mode: str = "refresh", as_of: str = "", extra: dict | None = None) -> str:
        return echo(snapshot=snapshot, mode=mode)

    return il.spec(trig)


def _compile(spec: il.PipelineSpec, out: Path) -> dict[str, launch_plan_pb2.LaunchPlan]:
    plans = {}
    for f in il.compile(spec, backend="flyte", out=out, version="v1", image="img:1", archive=False):
        if f.name.endswith("_3.pb"):
            msg = launch_plan_pb2.LaunchPlan()
            msg.ParseFromString(f.read_bytes())
            plans[msg.id.name] = msg
    return plans


def test_a_cron_and_an_every_are_two_launch_plans_with_their_inputs_and_concurrency(tmp_path: Path) -> None:
    spec = _pipeline(il.Cron("0 3 * * 1", inputs={"mode": "tune", "extra": {"k": 1}}, max_concurrent=2),
                     il.Every("6h", name="six"))
    plans = _compile(spec, tmp_path)
    assert sorted(plans) == ["trig", "trig-cron-0", "trig-six"]
    assert not plans["trig"].spec.entity_metadata.HasField("schedule")
    weekly = plans["trig-cron-0"].spec
    assert weekly.workflow_id.name == "trig"
    assert weekly.entity_metadata.schedule.cron_schedule.schedule == "0 3 * * 1"
    assert weekly.fixed_inputs.literals["mode"].scalar.primitive.string_value == "tune"
    # A dict in the workflow input's own form: JSON text in an Optional's union.
    assert weekly.fixed_inputs.literals["extra"].scalar.union.value.scalar.primitive.string_value == '{"k": 1}'
    assert weekly.concurrency_policy.max == 2
    assert weekly.concurrency_policy.behavior == launch_plan_pb2.CONCURRENCY_LIMIT_BEHAVIOR_SKIP
    rate = plans["trig-six"].spec.entity_metadata.schedule.rate
    assert (rate.value, rate.unit) == (6, 1)  # FixedRateUnit.HOUR
    assert not plans["trig-six"].spec.fixed_inputs.literals
    assert plans["trig-six"].spec.concurrency_policy.max == 1


def test_active_is_the_launch_plans_activation_on_register() -> None:
    # The .pb has no activation state (flyteadmin registers every plan inactive); pyflyte register
    # activates the plans flytekit marks auto_activate.
    spec = _pipeline(il.Cron("@daily"), il.Cron("@hourly", active=False, name="paused"))
    plans = {lp.name: lp for lp in launch_plans(build_entities(spec))}
    assert plans["trig-cron-0"].should_auto_activate is True
    assert plans["trig-paused"].should_auto_activate is False
    assert plans["trig"].should_auto_activate is False


@pytest.mark.parametrize(("trigger", "message", "hint"), [
    (il.Cron("0 3 * * *", tz="Europe/Berlin"), "reads crons in UTC", "tz='UTC'"),
    (il.Cron("0 3 * * *", time_input="as_of"), "kickoff time only as a datetime", "drop time_input"),
    (il.Every("1h", start="2026-01-01T00:00:00+00:00"), "counts from the launch plan's activation", "drop start="),
    (il.Cron("@daily", catch_up=True), "no per-launch-plan catch-up", "drop catch_up=True"),
])
def test_what_a_flyte_launch_plan_cannot_hold_is_refused_naming_the_trigger(
        tmp_path: Path, trigger: object, message: str, hint: str) -> None:
    with pytest.raises(CapabilityError, match=message) as err:
        _compile(_pipeline(trigger), tmp_path)
    assert err.value.step == trigger.label(0)  # type: ignore[attr-defined]
    assert hint in (err.value.hint or "")


@pytest.mark.parametrize(("trigger", "feature"), [
    (il.OnData("s3://b/snap/", uri_input="snapshot"), "trigger.data"),
    (il.OnDrift("s3://b/snap/", model="fraud"), "trigger.drift"),
])
def test_data_and_drift_triggers_are_refused_by_the_capability_check(tmp_path: Path, trigger: object,
                                                                      feature: str) -> None:
    with pytest.raises(CapabilityError, match=rf"cannot express '{feature}' \(used by {trigger.kind}-0\)"  # type: ignore[attr-defined]
                       r".*interlock watch FILE --backend flyte-local"):
        _compile(_pipeline(trigger), tmp_path)
    assert not list(tmp_path.glob("*.pb"))
