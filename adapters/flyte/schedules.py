"""The pipeline's time triggers as Flyte launch plans: one per ``il.Cron``/``il.Every``.

A Flyte user schedules a workflow with a launch plan (``CronSchedule``, ``FixedRate``) and
activates it (``flytectl update launchplan --activate``); each trigger gets its own plan,
``<pipeline>-<label>`` (``fraud-retrain-cron-0``), its inputs fixed, at most ``max_concurrent``
executions at once (the launch plan's concurrency policy: the next one is skipped), the
kickoff time bound to ``time_input`` (through the kickoff workflow, ``kickoff.py``). Data and
drift triggers have no Flyte 1 launch plan; the backend's capabilities refuse them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from interlock.core.base.errors import CapabilityError, PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec

from .types import to_flyte


def plan_name(spec: PipelineSpec, label: str) -> str:
    return f"{spec.name}-{label}"


def _refuse(spec: PipelineSpec, label: str, what: str, hint: str) -> CapabilityError:
    return CapabilityError(f"trigger {label!r}: {what}", pipeline=spec.name, step=label, hint=hint)


def schedule_of(spec: PipelineSpec, trig: Any, label: str) -> Any:
    """The flytekit schedule for one Cron or Every trigger, its kickoff time bound to ``time_input``."""
    from flytekit import CronSchedule, FixedRate

    if trig.kind == "every":
        if trig.start is not None:
            raise _refuse(spec, label, f"a Flyte FixedRate counts from the launch plan's activation, not from "
                          f"start={trig.start!r}", "drop start=, or write the schedule as an il.Cron")
        return FixedRate(duration=timedelta(seconds=trig.seconds), kickoff_time_input_arg=trig.time_input)
    if trig.tz != "UTC":
        # Neither CronSchedule nor the admin Schedule proto has a time zone: Flyte's scheduler reads UTC.
        raise _refuse(spec, label, f"Flyte 1 reads crons in UTC and has no time zone for tz={trig.tz!r}",
                      "write the cron in UTC (tz='UTC'), or compile for flyte2, airflow or argo, which take a time zone")
    try:
        return CronSchedule(schedule=trig.expr, kickoff_time_input_arg=trig.time_input)
    except (AssertionError, ValueError) as exc:  # croniter accepts what flytekit's own check does not
        raise PipelineDefinitionError(f"trigger {label!r}: cron {trig.expr!r} is not one Flyte accepts: {exc}",
                                      pipeline=spec.name, step=label) from exc


def scheduled_plans(entities: Any, make: Callable[..., Any], labels: Any, image: str | None = None) -> list[Any]:
    """One launch plan per time trigger; ``make(name, **kw)`` creates it (the compile's fresh
    LaunchPlan.create). A trigger with ``time_input`` runs its kickoff workflow (``kickoff.py``)."""
    from flytekit.models.concurrency import ConcurrencyLimitBehavior, ConcurrencyPolicy

    spec = entities.spec
    types = {p.name: p.type for p in spec.params}
    kickoff = None
    plans = []
    for i, trig in enumerate(spec.triggers):
        if trig.kind not in ("cron", "every"):
            continue  # refused by the capability check before compile
        label = trig.label(i)
        if trig.catch_up:
            raise _refuse(spec, label, "Flyte's scheduler has no per-launch-plan catch-up (it starts the times it "
                          "missed while down, and none from before activation)",
                          "drop catch_up=True for --backend flyte, or compile for airflow (catchup) or argo")
        name = plan_name(spec, label)
        workflow = entities.workflow
        if trig.time_input is not None:
            from .kickoff import build_kickoff, kickoff_workflow

            kickoff = kickoff or build_kickoff(spec.name, image)
            workflow = kickoff_workflow(entities, name, trig.time_input, kickoff)
        fixed = {k: to_flyte(v, types[k]) for k, v in trig.inputs}  # as the workflow's defaults are given
        plans.append(make(
            name, workflow=workflow, schedule=schedule_of(spec, trig, label), fixed_inputs=fixed or None,
            labels=labels,
            # auto_activate is client-side: `pyflyte register` activates the plan, a .pb file cannot say so.
            auto_activate=trig.active,
            concurrency=ConcurrencyPolicy(max_concurrency=trig.max_concurrent,
                                          behavior=ConcurrencyLimitBehavior.SKIP),
        ))
    return plans
