"""Flyte 2 compile: the pipeline's time triggers are flyte.Trigger objects on the driver task,
read from the imported module through the SDK's own types; what a Flyte 2 trigger cannot hold
is refused at compile naming the trigger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import flyte
import flyte2_pipelines as fp
import pytest
from flyte2_compiled import import_module

import interlock as il
from interlock.adapters.flyte2.local import isolated_flyte
from interlock.core.base.errors import CapabilityError


@il.step
def echo(snapshot: str, mode: str) -> str:
    return snapshot + mode


def _pipeline(*triggers: object) -> il.PipelineSpec:
    @il.pipeline(name="f2-trig", triggers=list(triggers))
    def f2_trig(snapshot: str = "s0", mode: str = "refresh", as_of: str = "", extra: dict | None = None) -> str:
        return echo(snapshot=snapshot, mode=mode)

    return il.spec(f2_trig)


def _driver_triggers(spec: il.PipelineSpec, out: Path) -> dict[str, flyte.Trigger]:
    [path] = il.compile(spec, backend="flyte2", out=str(out))
    return {t.name: t for t in import_module(Path(path)).DRIVER.triggers}


def test_a_cron_with_a_time_zone_and_an_every_are_triggers_on_the_driver(tmp_path: Path) -> None:
    spec = _pipeline(
        il.Cron("0 3 * * 1", tz="Europe/Berlin", inputs={"mode": "tune", "extra": {"k": 1}}, time_input="as_of"),
        il.Every("90m", start="2026-01-01T00:00:00+00:00", name="rate", active=False),
    )
    triggers = _driver_triggers(spec, tmp_path)
    assert sorted(triggers) == ["f2-trig-cron-0", "f2-trig-rate"]
    weekly = triggers["f2-trig-cron-0"]
    assert weekly.automation == flyte.Cron("0 3 * * 1", timezone="Europe/Berlin")
    assert weekly.inputs == {"as_of": flyte.TriggerTime, "mode": "tune", "extra": '{"k": 1}'}  # the driver's JSON text
    assert weekly.auto_activate is True
    rate = triggers["f2-trig-rate"]
    assert rate.automation == flyte.FixedRate(90, start_time=datetime(2026, 1, 1, tzinfo=UTC))
    assert rate.inputs is None
    assert rate.auto_activate is False


def test_the_time_parameter_is_a_datetime_input_and_the_pipeline_gets_its_iso_text(tmp_path: Path) -> None:
    # As the SDK binds flyte.TriggerTime: to a datetime input of the task.
    [path] = il.compile(fp.timed, backend="flyte2", out=str(tmp_path / "build"), store=str(tmp_path / "store"))
    mod = import_module(Path(path))
    assert mod.DRIVER.native_interface.inputs["as_of"][0] == datetime | None
    [trigger] = mod.DRIVER.triggers
    assert trigger.inputs == {"as_of": flyte.TriggerTime, "mode": "refresh"}
    from interlock.adapters.flyte2 import values

    def run(**given: object) -> str:
        with isolated_flyte(tmp_path / "flyte-cache"):
            done = flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw"),
                                         run_base_dir=str(tmp_path / "base")).run(mod.DRIVER, **given)
        out = done.outputs()[0] if isinstance(done.outputs(), tuple) else done.outputs().o0
        return values.get(tmp_path / "store", json.loads(out)["o0"], il.spec(fp.timed).output_types[0][1])

    fired = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)  # what the platform hands the trigger's run
    assert run(as_of=fired, mode="refresh") == "refresh@2026-12-07T02:00:00+00:00"
    assert run() == "tune@"  # a manual run without it: the pipeline's default


def test_flyte2_local_renders_no_trigger_interlock_watch_starts_its_runs() -> None:
    from interlock.adapters.flyte2.render import render

    spec = _pipeline(il.Cron("@daily", catch_up=True))  # refused on flyte2, irrelevant locally
    assert "flyte.Trigger" not in render(spec, store="/tmp/x", triggers=False)


@pytest.mark.parametrize(("trigger", "message", "hint"), [
    (il.Cron("@daily", catch_up=True), "has no catch-up", "drop catch_up=True"),
    (il.Every("90s"), "whole minutes", "in minutes"),
])
def test_what_a_flyte2_trigger_cannot_hold_is_refused_naming_the_trigger(
        tmp_path: Path, trigger: object, message: str, hint: str) -> None:
    with pytest.raises(CapabilityError, match=message) as err:
        _driver_triggers(_pipeline(trigger), tmp_path)
    assert err.value.step == trigger.label(0)  # type: ignore[attr-defined]
    assert hint in (err.value.hint or "")


@pytest.mark.parametrize(("trigger", "feature"), [
    (il.OnData("s3://b/snap/", uri_input="snapshot"), "trigger.data"),
    (il.OnDrift("s3://b/snap/", model="fraud"), "trigger.drift"),
])
def test_data_and_drift_triggers_are_refused_by_the_capability_check(tmp_path: Path, trigger: object,
                                                                      feature: str) -> None:
    with pytest.raises(CapabilityError, match=rf"cannot express '{feature}'.*"
                       r"interlock watch FILE --backend flyte2-local"):
        _driver_triggers(_pipeline(trigger), tmp_path)
