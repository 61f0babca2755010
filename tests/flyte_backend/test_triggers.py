"""Flyte 1 compile: each time trigger is a launch plan of its own, as a Flyte user writes it
(CronSchedule / FixedRate, fixed inputs, a concurrency policy), read back from the protobufs;
what Flyte 1 cannot hold is refused at compile naming the trigger."""

from __future__ import annotations

from pathlib import Path

import pytest
from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2
from flyteidl.core import types_pb2

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


def _files(spec: il.PipelineSpec, out: Path) -> list[Path]:
    return il.compile(spec, backend="flyte", out=out, version="v1", image="img:1", archive=False)


def _compile(spec: il.PipelineSpec, out: Path) -> dict[str, launch_plan_pb2.LaunchPlan]:
    plans = {}
    for f in _files(spec, out):
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


def test_time_input_is_the_kickoff_time_through_a_kickoff_workflow(tmp_path: Path) -> None:
    spec = _pipeline(il.Cron("0 3 * * 1", inputs={"mode": "tune"}, time_input="as_of"), il.Every("6h"))
    files = {f.name: f for f in _files(spec, tmp_path)}
    plans = _compile(spec, tmp_path / "again")
    weekly = plans["trig-cron-0"].spec
    assert weekly.entity_metadata.schedule.kickoff_time_input_arg == "as_of"
    assert weekly.workflow_id.name == "trig-cron-0"  # the kickoff workflow, not the pipeline's
    assert plans["trig-every-1"].spec.workflow_id.name == "trig"  # no time bound: the pipeline's own
    assert weekly.default_inputs.parameters["as_of"].required  # the scheduler gives it
    [wf_file] = [p for n, p in files.items() if n.endswith("_trig-cron-0_2.pb")]
    wf = workflow_pb2.WorkflowSpec()
    wf.ParseFromString(wf_file.read_bytes())
    inputs = wf.template.interface.inputs.variables
    assert inputs["as_of"].type.simple == types_pb2.DATETIME  # what flyteadmin binds the kickoff time to
    assert inputs["mode"].type.simple == types_pb2.STRING
    kinds = [n.WhichOneof("target") for n in wf.template.nodes]
    assert kinds == ["task_node", "workflow_node"]
    assert wf.template.nodes[0].task_node.reference_id.name == "trig.kickoff"
    assert wf.template.nodes[1].workflow_node.sub_workflow_ref.name == "trig"
    [task_file] = [p for n, p in files.items() if n.endswith("_trig.kickoff_1.pb")]
    task = task_pb2.TaskSpec()
    task.ParseFromString(task_file.read_bytes())
    args = list(task.template.container.args)
    assert args[-2:] == ["kickoff", "trig"] and "interlock.adapters.flyte.resolver.resolver" in args
    assert task.template.container.image == "img:1"


@il.step
def stamp(snapshot: str, as_of: str) -> str:
    return f"{snapshot}@{as_of}"


def test_the_kickoff_workflow_runs_the_pipeline_with_the_time_as_text(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    @il.pipeline(name="trig-timed", triggers=[il.Cron("@daily", time_input="as_of")])
    def timed(snapshot: str = "s0", as_of: str = "") -> str:
        return stamp(snapshot=snapshot, as_of=as_of)

    monkeypatch.chdir(tmp_path)  # the shim's work directory, if it makes one
    [_, plan] = launch_plans(build_entities(il.spec(timed)))
    assert plan.workflow.name == "trig-timed-cron-0"
    # flytekit's local execution of what the scheduler starts: the kickoff time as a datetime
    assert plan.workflow(as_of=datetime(2026, 12, 7, 3, tzinfo=UTC), snapshot="x") == "x@2026-12-07T03:00:00+00:00"


def test_the_kickoff_task_writes_the_time_as_the_pipelines_text() -> None:
    from datetime import UTC, datetime

    from interlock.adapters.flyte.kickoff import build_kickoff
    from interlock.adapters.flyte.resolver import resolver

    task = build_kickoff("trig", "img:1")
    assert resolver.loader_args(None, task) == ["kickoff", "trig"]
    again = resolver.load_task(("kickoff", "trig"))  # as pyflyte-execute rebuilds it in the pod
    assert again.name == "trig.kickoff"
    assert again(t=datetime(2026, 12, 7, 3, tzinfo=UTC)) == "2026-12-07T03:00:00+00:00"


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
