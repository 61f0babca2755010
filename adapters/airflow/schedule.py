"""The pipeline's triggers as the DAG's ``schedule``, and what a triggered run's params become.

An Airflow user schedules a DAG with a timetable and with assets: il.Cron is a
``CronTriggerTimetable(expr, timezone=tz)`` (several crons in one zone a
``MultipleCronTriggerTimetable``), il.Every a ``DeltaTriggerTimetable`` (from ``start`` as the
DAG's ``start_date``), il.OnData an ``Asset`` (several: any of them), both together an
``AssetOrTimeSchedule``. A DAG has one schedule and one set of run settings, so the triggers
share ``active`` (``is_paused_upon_creation``), ``catch_up`` (``catchup``) and ``max_concurrent``
(``max_active_runs``); the time triggers share their inputs (the params of a scheduled run),
the data triggers theirs (of an asset-triggered run). Triggers that differ are refused with the
way out: one pipeline per trigger.

A run's params: the DAG's params (the pipeline's defaults, or what a manual run gave), and for a
scheduled run the time triggers' inputs and the logical date (the trigger time, ISO 8601 in the
cron's zone) as ``time_input``; for an asset-triggered run the data triggers' inputs and the new
object's URI as ``uri_input``: the asset event's ``extra["uri"]`` (what the producer that landed
the object records: ``outlet_events[asset].extra = {"uri": ...}``), else the asset's URI.

Compile time: the schedule is plain data in the DAG description (``schedule_args``); the loader
makes Airflow's timetable and assets from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from interlock.core.base.errors import CapabilityError
from interlock.core.model.pipeline_spec import PipelineSpec

ONE_DAG = "compile one pipeline per trigger (each with its own @il.pipeline(triggers=[...])), one DAG each"


@dataclass(frozen=True)
class Schedule:
    """The DAG's schedule and run settings, read from the triggers (``plan``)."""

    crons: tuple[str, ...] = ()
    tz: str = "UTC"
    every_s: float | None = None
    start: str | None = None
    assets: tuple[str, ...] = ()
    active: bool = True
    catch_up: bool = False
    max_concurrent: int = 1
    time_inputs: tuple[tuple[str, Any], ...] = ()
    time_param: str | None = None
    data_inputs: tuple[tuple[str, Any], ...] = ()
    uri_param: str | None = None

    @property
    def timed(self) -> bool:
        return bool(self.crons) or self.every_s is not None


def asset_uri(uri: str) -> str:
    """A folder as a ``file://`` URI (an Asset's URI has a scheme); others as they are."""
    return uri if "://" in uri else "file://" + uri


def _same(spec: PipelineSpec, triggers: list[tuple[str, Any]], what: str, value: Any) -> Any:
    seen = {label: value(t) for label, t in triggers}
    if len(set(map(repr, seen.values()))) > 1:
        listed = ", ".join(f"{label}: {v!r}" for label, v in seen.items())
        raise CapabilityError(f"an Airflow DAG has one {what}, and the triggers differ ({listed})",
                              pipeline=spec.name, step=next(iter(seen)), hint=ONE_DAG)
    return next(iter(seen.values()))


def plan(spec: PipelineSpec) -> Schedule | None:
    """The schedule, or None without triggers; triggers one DAG cannot hold are refused."""
    # Drift has no Airflow form: the capability check refuses it before compile.
    every = [(t.label(i), t) for i, t in enumerate(spec.triggers) if t.kind != "drift"]
    if not every:
        return None
    timed = [(lb, t) for lb, t in every if t.kind in ("cron", "every")]
    data = [(lb, t) for lb, t in every if t.kind == "data"]
    kw: dict[str, Any] = {
        "active": _same(spec, every, "paused state (active)", lambda t: t.active),
        "catch_up": _same(spec, every, "catchup", lambda t: t.catch_up),
        "max_concurrent": _same(spec, every, "max_active_runs (max_concurrent)", lambda t: t.max_concurrent),
    }
    crons = [(lb, t) for lb, t in timed if t.kind == "cron"]
    rates = [(lb, t) for lb, t in timed if t.kind == "every"]
    if crons and rates:
        raise CapabilityError(f"an Airflow DAG has one timetable: cron {crons[0][0]!r} and il.Every {rates[0][0]!r} "
                              "cannot both be its schedule", pipeline=spec.name, step=rates[0][0],
                              hint=f"write the il.Every as an il.Cron, or {ONE_DAG}")
    if len(rates) > 1:
        raise CapabilityError("an Airflow DAG has one DeltaTriggerTimetable; the pipeline has "
                              f"{len(rates)} il.Every triggers", pipeline=spec.name, step=rates[1][0], hint=ONE_DAG)
    if crons:
        kw["crons"] = tuple(t.expr for _, t in crons)
        kw["tz"] = _same(spec, crons, "time zone for its crons", lambda t: t.tz)
    if rates:
        kw["every_s"], kw["start"] = rates[0][1].seconds, rates[0][1].start
    if timed:
        kw["time_inputs"] = _same(spec, timed, "set of params for a scheduled run (inputs)", lambda t: t.inputs)
        kw["time_param"] = _same(spec, timed, "time_input", lambda t: t.time_input)
    if data:
        kw["assets"] = tuple(asset_uri(t.uri) for _, t in data)
        kw["data_inputs"] = _same(spec, data, "set of params for an asset-triggered run (inputs)", lambda t: t.inputs)
        kw["uri_param"] = _same(spec, data, "uri_input", lambda t: t.uri_input)
    return Schedule(**kw)


def schedule_args(spec: PipelineSpec, scheduled: bool) -> dict[str, Any]:
    """The DAG's schedule as plain data for the loader: ``timetable`` (crons, tz, every_s,
    assets), ``catchup``, ``max_active_runs``, ``is_paused_upon_creation``, ``start_date`` (ISO);
    none but ``catchup=False`` unscheduled (airflow-local: dag.test() runs once)."""
    s = plan(spec) if scheduled else None
    if s is None:
        return {"timetable": None, "catchup": False}
    out: dict[str, Any] = {"timetable": {"crons": list(s.crons), "tz": s.tz, "every_s": s.every_s,
                                         "assets": list(s.assets)},
                           "catchup": s.catch_up, "max_active_runs": s.max_concurrent,
                           "is_paused_upon_creation": not s.active}
    if s.start is not None:
        from interlock.core.model.triggers import parse_time

        out["start_date"] = parse_time(s.start, "Every start").isoformat()
    return out


def run_params(spec: PipelineSpec, params: Mapping[str, Any], run_type: str, logical_date: datetime | None,
               events: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The run's params: ``params`` (the DAG run's), with what its trigger passes. ``run_type``:
    Airflow's (``scheduled``, ``asset_triggered``, ``manual``...); ``events``: (asset URI, extra)
    of each triggering asset event, oldest first."""
    out = dict(params)
    if run_type not in ("scheduled", "asset_triggered"):
        return out  # a manual run (airflow-local's dag.test() too): its params as given
    s = plan(spec)
    if s is None:
        return out
    if run_type == "scheduled" and s.timed:
        out.update(s.time_inputs)
        if s.time_param is not None and logical_date is not None:
            from zoneinfo import ZoneInfo

            out[s.time_param] = logical_date.astimezone(ZoneInfo(s.tz)).isoformat()
    elif run_type == "asset_triggered" and s.assets:
        out.update(s.data_inputs)
        listed = list(events)
        if s.uri_param is not None and listed:
            uri, extra = listed[-1]  # the newest: one run per event unless Airflow queued several
            out[s.uri_param] = str((extra or {}).get("uri") or uri)
    return out


def context_params(spec: PipelineSpec, ctx: Mapping[str, Any]) -> dict[str, Any]:
    """``run_params`` from a task's Airflow context."""
    run_type = getattr(ctx["dag_run"], "run_type", "manual")
    events = sorted((e for evs in (ctx.get("triggering_asset_events") or {}).values() for e in evs),
                    key=lambda e: e.timestamp)
    return run_params(spec, ctx["params"], str(getattr(run_type, "value", run_type)), ctx.get("logical_date"),
                      [(e.asset.uri, e.extra or {}) for e in events])


# A pod's view of its run's trigger (pod.py's env, rendered by Airflow when the task starts):
# JSON of the run type, the logical date and the triggering asset events (a list closed by null).
TRIGGER_ENV = "INTERLOCK_AIRFLOW_TRIGGER"
TRIGGER_TEMPLATE = (
    '{"run_type": {{ dag_run.run_type | string | tojson }}, '
    '"logical_date": {{ (logical_date.isoformat() if logical_date else none) | tojson }}, "events": ['
    "{% for evs in (triggering_asset_events or {}).values() %}{% for e in evs %}"
    '{{ {"uri": e.asset.uri, "extra": e.extra or {}, "at": e.timestamp.isoformat()} | tojson }}, '
    "{% endfor %}{% endfor %}null]}"
)


def env_params(spec: PipelineSpec, params: Mapping[str, Any], text: str | None) -> dict[str, Any]:
    """``run_params`` from a pod's ``TRIGGER_ENV`` (``TRIGGER_TEMPLATE`` as Airflow rendered it)."""
    if not text:
        return dict(params)
    import json

    doc = json.loads(text)
    events = sorted((e for e in doc["events"] if e is not None), key=lambda e: e["at"])
    when = datetime.fromisoformat(doc["logical_date"]) if doc.get("logical_date") else None
    return run_params(spec, params, doc["run_type"], when, [(e["uri"], e["extra"]) for e in events])
