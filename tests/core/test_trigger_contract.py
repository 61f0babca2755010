"""The trigger contract (core/model/triggers.py): what each trigger accepts, and the checks
against the pipeline's parameters that every backend relies on."""

from __future__ import annotations

import pytest

import interlock as il
from interlock.core.backend.protocol import features_used
from interlock.core.model.pipeline_spec import PipelineSpec


@il.step
def echo(snapshot: str, mode: str) -> str:
    return snapshot + mode


def _pipeline(triggers: list[object], signature: str = "snapshot: str = 'x', mode: str = 'refresh', as_of: str = ''"):
    ns: dict[str, object] = {"echo": echo}
    exec(f"def body({signature}):\n    return echo(snapshot='s', mode='m')", ns)  # noqa: S102 - a test's own source
    return il.pipeline(name="trig", triggers=triggers)(ns["body"])


def test_triggers_round_trip_through_the_spec_and_name_their_features() -> None:
    p = _pipeline([il.Cron("0 6 * * 1", tz="Europe/Berlin", inputs={"mode": "tune"}, time_input="as_of"),
                   il.OnData("s3://b/snap/", uri_input="snapshot"), il.Every("6h", name="six")])
    spec = il.spec(p)
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert features_used(spec) == {"trigger.cron": ["cron-0"], "trigger.data": ["data-1"], "trigger.every": ["six"]}


def test_schedule_is_one_cron_and_an_old_spec_schedule_loads_as_one() -> None:
    @il.pipeline(name="sched", schedule="0 3 * * *")
    def sched(snapshot: str = "x"):
        return echo(snapshot=snapshot, mode="m")

    assert il.spec(sched).triggers == (il.Cron("0 3 * * *"),)
    old = {**il.spec(sched).to_json(), "schedule": "0 4 * * *"}
    old.pop("triggers")
    assert PipelineSpec.from_json(old).triggers == (il.Cron("0 4 * * *"),)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: il.Cron("61 * * * *"), "not a five-field cron"),
    (lambda: il.Cron("* * *"), "not a five-field cron"),
    (lambda: il.Cron("@daily", tz="Mars/Olympus"), "time zone 'Mars/Olympus' is unknown"),
    (lambda: il.Every("10s"), "under a minute"),
    (lambda: il.Every("1h", start="yesterday"), "not an ISO 8601 time"),
    (lambda: il.OnDrift("/data", model="fraud", ks=1.5), "between 0 and 1"),
    (lambda: il.Cron("@daily", max_concurrent=0), "max_concurrent=0"),
])
def test_a_malformed_trigger_is_refused_where_it_is_written(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(il.PolicyError, match=message):
        make()


@pytest.mark.parametrize(("trigger", "signature", "message"), [
    (il.OnData("/x", uri_input="nope"), "a: int = 1", "sets 'nope', which is not a parameter"),
    (il.OnData("/x", uri_input="a"), "a: int = 1", "binds its uri to 'a', a int parameter: it must be a str"),
    (il.Cron("@daily"), "a: int", "leaves 'a' without a value"),
    (il.Cron("@daily", inputs={"a": "x"}), "a: int", "gives a='x', not a int"),
])
def test_a_trigger_that_does_not_fit_the_parameters_is_refused_at_build(trigger, signature: str,  # type: ignore[no-untyped-def]
                                                                        message: str) -> None:
    with pytest.raises(il.PipelineDefinitionError, match=message):
        il.spec(_pipeline([trigger], signature))
