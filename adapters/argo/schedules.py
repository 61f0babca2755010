"""The pipeline's time triggers as Argo ``CronWorkflow`` manifests, one per il.Cron / il.Every.

As an Argo user writes them: ``schedules`` (an il.Every is ``@every 6h``), ``timezone`` (always
written: Argo's default is the controller's own zone), ``concurrencyPolicy`` (``Forbid`` for
one run at a time; Argo cannot cap at N > 1, so more is ``Allow``), ``startingDeadlineSeconds``
for catch-up, ``suspend`` for an inactive trigger, and the trigger's inputs as the workflow's
arguments, the time as ``{{workflow.scheduledTime}}``. One trigger: its CronWorkflow holds the
whole workflow. Several: the body is a WorkflowTemplate and each CronWorkflow runs it
(``workflowTemplateRef``) with its own arguments, so the body is written once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from interlock.core.base.errors import CapabilityError
from interlock.core.model.pipeline_spec import PipelineSpec

from .names import dns
from .values import default_text

SCHEDULED_TIME = "{{workflow.scheduledTime}}"
CRON_NAME_LIMIT = 52  # Argo appends a timestamp to a CronWorkflow's name for each workflow


def time_triggers(spec: PipelineSpec) -> list[tuple[str, Any]]:
    """(label, trigger) of each Cron and Every; data and drift are refused by the capabilities."""
    return [(t.label(i), t) for i, t in enumerate(spec.triggers) if t.kind in ("cron", "every")]


def _refuse(spec: PipelineSpec, label: str, what: str, hint: str) -> CapabilityError:
    return CapabilityError(f"trigger {label!r}: {what}", pipeline=spec.name, step=label, hint=hint)


def go_duration(seconds: float) -> str:
    """``21600`` -> ``6h``, ``5400`` -> ``1h30m``: the Go duration robfig/cron's ``@every`` reads."""
    s = int(seconds)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


def _period(trig: Any) -> int:
    """Seconds between two consecutive times of the trigger (the catch-up window)."""
    if trig.kind == "every":
        return int(trig.seconds)
    from croniter import croniter

    it = croniter(trig.expr, datetime(2026, 1, 1, tzinfo=UTC))
    a, b = it.get_next(datetime), it.get_next(datetime)
    return int((b - a).total_seconds())


def cron_spec(spec: PipelineSpec, label: str, trig: Any) -> dict[str, Any]:
    """The CronWorkflow's spec, less its ``workflowSpec``."""
    if trig.kind == "every":
        if trig.start is not None:
            raise _refuse(spec, label, f"Argo's @every counts from the controller's start, not from "
                          f"start={trig.start!r}", "drop start=, or write the schedule as an il.Cron")
        schedule, tz = f"@every {go_duration(trig.seconds)}", "UTC"
    else:
        schedule, tz = trig.expr, trig.tz
    out: dict[str, Any] = {"schedules": [schedule], "timezone": tz,
                           "concurrencyPolicy": "Forbid" if trig.max_concurrent == 1 else "Allow"}
    if trig.catch_up:
        # Argo starts the latest missed time (not each one) when it is within the deadline.
        out["startingDeadlineSeconds"] = _period(trig)
    if not trig.active:
        out["suspend"] = True
    return out


def arguments(spec: PipelineSpec, trig: Any) -> list[dict[str, str]]:
    """The parameters this trigger sets: its inputs, and its time as Argo's scheduled time."""
    types = {p.name: p.type for p in spec.params}
    out = [{"name": k, "value": default_text(v, types[k])} for k, v in trig.inputs]
    if trig.time_input is not None:
        out.append({"name": trig.time_input, "value": SCHEDULED_TIME})
    return sorted(out, key=lambda p: p["name"])


def with_arguments(body: dict[str, Any], given: list[dict[str, str]]) -> dict[str, Any]:
    """``body`` with the parameters in ``given`` set (the others keep their defaults)."""
    values = {p["name"]: p["value"] for p in given}
    params = [{**p, "value": values[p["name"]]} if p["name"] in values else p
              for p in body.get("arguments", {}).get("parameters", [])]
    return {**body, "arguments": {"parameters": params}} if params else body


def cron_workflows(spec: PipelineSpec, body: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """One CronWorkflow per time trigger: with one, it holds ``body``; with several, each runs
    the WorkflowTemplate named as the pipeline (``workflowTemplateRef``), written beside them."""
    from .manifest import API_VERSION

    triggers = time_triggers(spec)
    docs = []
    for label, trig in triggers:
        given = arguments(spec, trig)
        if len(triggers) == 1:
            name, wf_spec = dns(spec.name, CRON_NAME_LIMIT), with_arguments(body, given)
        else:
            name = dns(f"{spec.name}-{label}", CRON_NAME_LIMIT)
            wf_spec = {"workflowTemplateRef": {"name": dns(spec.name)}}
            if given:
                wf_spec["arguments"] = {"parameters": given}
        docs.append({"apiVersion": API_VERSION, "kind": "CronWorkflow", "metadata": {**meta, "name": name},
                     "spec": {**cron_spec(spec, label, trig), "workflowSpec": wf_spec}})
    return docs
