"""Argo compile: each time trigger is a CronWorkflow as an Argo user writes it, loaded back
through hera's models; what Argo cannot hold is refused at compile naming the trigger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import interlock as il
from interlock.adapters.argo.manifest import validate
from interlock.adapters.argo.schedules import go_duration
from interlock.core.base.errors import CapabilityError


@il.step
def echo(snapshot: str, mode: str) -> str:
    return snapshot + mode


def _pipeline(*triggers: object) -> il.PipelineSpec:
    @il.pipeline(name="argo-trig", triggers=list(triggers))
    def argo_trig(snapshot: str = "s0", mode: str = "refresh", as_of: str = "", n: int = 1) -> str:
        return echo(snapshot=snapshot, mode=mode)

    return il.spec(argo_trig)


def _compile(spec: il.PipelineSpec, out: Path) -> dict[str, dict[str, Any]]:
    docs = {}
    for path in il.compile(spec, backend="argo", out=out, image="registry.example/team:1"):
        doc = yaml.safe_load(path.read_text())
        validate(doc)  # from the file as written: hera's models know every field
        docs[path.name] = doc
    return docs


def _args(wf_spec: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p.get("value") for p in wf_spec.get("arguments", {}).get("parameters", [])}


def test_one_cron_with_a_time_zone_is_one_cron_workflow_holding_the_workflow(tmp_path: Path) -> None:
    spec = _pipeline(il.Cron("0 6 * * 1", tz="Europe/Berlin", inputs={"mode": "tune", "n": 3}, time_input="as_of"))
    [(name, doc)] = _compile(spec, tmp_path).items()
    assert name == "argo-trig.yaml" and doc["kind"] == "CronWorkflow"
    assert doc["metadata"]["name"] == "argo-trig"
    cron = doc["spec"]
    assert cron["schedules"] == ["0 6 * * 1"] and cron["timezone"] == "Europe/Berlin"
    assert cron["concurrencyPolicy"] == "Forbid"
    assert "suspend" not in cron and "startingDeadlineSeconds" not in cron
    assert cron["workflowSpec"]["entrypoint"] == "main"
    assert _args(cron["workflowSpec"]) == {"snapshot": "s0", "mode": "tune", "as_of": "{{workflow.scheduledTime}}",
                                           "n": "3"}


def test_two_triggers_are_a_workflow_template_and_a_cron_workflow_each(tmp_path: Path) -> None:
    spec = _pipeline(il.Cron("@daily", catch_up=True, max_concurrent=3),
                     il.Every("90m", name="rate", active=False, inputs={"mode": "tune"}))
    docs = _compile(spec, tmp_path)
    assert sorted(docs) == ["argo-trig-cron-0.yaml", "argo-trig-rate.yaml", "argo-trig.yaml"]
    template = docs["argo-trig.yaml"]
    assert template["kind"] == "WorkflowTemplate" and template["metadata"]["name"] == "argo-trig"
    assert _args(template["spec"])["mode"] == "refresh"  # the defaults; each trigger sets its own
    daily, rate = docs["argo-trig-cron-0.yaml"]["spec"], docs["argo-trig-rate.yaml"]["spec"]
    assert daily["workflowSpec"] == {"workflowTemplateRef": {"name": "argo-trig"}}
    assert daily["schedules"] == ["@daily"] and daily["timezone"] == "UTC"
    assert daily["concurrencyPolicy"] == "Allow"  # Argo caps at one or none
    assert daily["startingDeadlineSeconds"] == 86400  # one period: the latest missed day starts
    assert rate["schedules"] == ["@every 1h30m"] and rate["suspend"] is True
    assert rate["workflowSpec"] == {"workflowTemplateRef": {"name": "argo-trig"},
                                    "arguments": {"parameters": [{"name": "mode", "value": "tune"}]}}


def test_a_compile_with_fewer_triggers_leaves_no_cron_workflow_of_the_earlier_one(tmp_path: Path) -> None:
    _compile(_pipeline(il.Cron("@daily"), il.Every("1h", name="hourly")), tmp_path)
    other = tmp_path / "argo-trig-notes.yaml"
    other.write_text("kind: ConfigMap\n")  # not a CronWorkflow of the pipeline: kept
    assert sorted(_compile(_pipeline(il.Cron("@daily")), tmp_path)) == ["argo-trig.yaml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argo-trig-notes.yaml", "argo-trig.yaml"]


def test_go_durations() -> None:
    assert [go_duration(s) for s in (60, 5400, 21600, 86461)] == ["1m", "1h30m", "6h", "24h1m1s"]


def test_an_every_with_a_start_is_refused_naming_the_trigger(tmp_path: Path) -> None:
    with pytest.raises(CapabilityError, match="counts from the controller's start") as err:
        _compile(_pipeline(il.Every("1h", start="2026-01-01T00:00:00+00:00", name="hourly")), tmp_path)
    assert err.value.step == "hourly" and "il.Cron" in (err.value.hint or "")


@pytest.mark.parametrize(("trigger", "feature"), [
    (il.OnData("s3://b/snap/", uri_input="snapshot"), "trigger.data"),
    (il.OnDrift("s3://b/snap/", model="fraud"), "trigger.drift"),
])
def test_data_and_drift_triggers_are_refused_by_the_capability_check(tmp_path: Path, trigger: object,
                                                                      feature: str) -> None:
    with pytest.raises(CapabilityError, match=rf"cannot express '{feature}'.*interlock watch FILE"):
        _compile(_pipeline(trigger), tmp_path)
    assert not list(tmp_path.iterdir())
