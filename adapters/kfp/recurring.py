"""The pipeline's time triggers as KFP recurring runs: written beside the IR at compile, created
on a cluster by ``interlock triggers apply FILE --backend kfp`` (``KfpBackend.apply_triggers``).

KFP's IR has no schedule; a KFP user creates a recurring run with
``kfp.Client(host=...).create_recurring_run(experiment_id, job_name, cron_expression=...,
pipeline_package_path=..., params=...)``. Compile writes ``<pipeline>.recurring.json``: one
entry per il.Cron / il.Every, named ``<pipeline>-<label>``: KFP's six-field cron (seconds
first: ``0 <expr>``) or ``interval_second`` (and ``start_time`` from Every's start),
``max_concurrency``, ``no_catchup`` (not catch_up), ``enabled`` (active) and the parameters:
the trigger's inputs and its time as the scheduled-workflow controller's macro
``[[ScheduledTime.2006-01-02T15:04:05Z07:00]]`` (the scheduled time, RFC 3339, in UTC).
KFP reads crons in UTC, so a cron in another zone is refused with the way out.

Applying replaces a recurring run of the same name in the experiment (deleted, then created
from the IR beside the definitions), so a second apply leaves one run per trigger, up to date.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path
from typing import Any

from interlock.core.base.errors import CapabilityError, InterlockError, PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec

from .types import run_parameters

SUFFIX = ".recurring.json"
# The scheduled-workflow controller's macro, with a Go time layout: RFC 3339 in UTC.
SCHEDULED_TIME = "[[ScheduledTime.2006-01-02T15:04:05Z07:00]]"


class RecurringRunError(InterlockError):
    """The KFP API refused or could not be reached while applying recurring runs."""

    code = "KFP_API"
    retryable = True


def kfp_cron(expr: str) -> str:
    """KFP's cron has a seconds field first; an alias (``@daily``) stays as it is."""
    return expr if expr.startswith("@") else f"0 {expr}"


def definitions(spec: PipelineSpec) -> list[dict[str, Any]]:
    """One recurring-run definition per time trigger (data and drift: refused by the capabilities)."""
    out = []
    for i, trig in enumerate(spec.triggers):
        if trig.kind not in ("cron", "every"):
            continue
        label = trig.label(i)
        d: dict[str, Any] = {"name": f"{spec.name}-{label}", "trigger": label}
        if trig.kind == "cron":
            if trig.tz != "UTC":
                raise CapabilityError(
                    f"trigger {label!r}: a KFP recurring run reads its cron in UTC and has no time zone for "
                    f"tz={trig.tz!r}", pipeline=spec.name, step=label,
                    hint="write the cron in UTC (tz='UTC'), or compile for flyte2, airflow or argo, which take a zone")
            d["cron_expression"] = kfp_cron(trig.expr)
        else:
            d["interval_second"] = int(trig.seconds)
            if trig.start is not None:
                from interlock.core.model.triggers import parse_time

                d["start_time"] = parse_time(trig.start, "Every start").isoformat()
        params = run_parameters(spec, dict(trig.inputs))  # as KFP takes them: JSON text for dicts, dataclasses
        if trig.time_input is not None:
            params[trig.time_input] = SCHEDULED_TIME
        d.update(max_concurrency=trig.max_concurrent, no_catchup=not trig.catch_up, enabled=trig.active,
                 params=params)
        out.append(d)
    return out


def write(spec: PipelineSpec, ir: Path) -> Path | None:
    """``<pipeline>.recurring.json`` beside the IR file, when the pipeline has time triggers."""
    defs = definitions(spec)
    path = ir.with_name(f"{spec.name}{SUFFIX}")
    if not defs:
        path.unlink(missing_ok=True)  # a compile over an older one must not leave its schedules behind
        return None
    path.write_text(json.dumps({"pipeline": spec.name, "ir": ir.name, "recurring_runs": defs}, indent=1))
    return path


def read(spec: PipelineSpec, compiled: Path) -> tuple[dict[str, Any], Path]:
    """The definitions and the IR file from a compile output folder (or the definitions file)."""
    path = compiled if compiled.suffix == ".json" else compiled / f"{spec.name}{SUFFIX}"
    if not path.is_file():
        raise PipelineDefinitionError(
            f"no recurring-run definitions at {path}", pipeline=spec.name,
            hint=f"compile first: interlock compile FILE --backend kfp --out {path.parent}; a pipeline without "
            "il.Cron / il.Every triggers has none")
    doc = json.loads(path.read_text())
    return doc, path.with_name(doc["ir"])


def apply(spec: PipelineSpec, compiled: Path, *, host: str | None, experiment: str,
          namespace: str | None = None) -> list[str]:
    """Create each recurring run through ``kfp.Client``, replacing one of the same name."""
    doc, ir = read(spec, compiled)
    if not host:
        raise PipelineDefinitionError("applying recurring runs needs the KFP API's address", pipeline=spec.name,
                                      hint="--option host=http://ml-pipeline-ui.kubeflow (the KFP endpoint)")
    from kfp import Client

    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():  # kfp prints UI links, warns
            warnings.simplefilter("ignore", FutureWarning)  # "only works with KFP v2.0.0-beta.2 and later"
            client = Client(host=host, namespace=namespace or "kubeflow")
            exp = client.create_experiment(experiment, namespace=namespace)  # the existing one, or a new one
        existing = _by_name(client, exp.experiment_id)
        lines = []
        for d in doc["recurring_runs"]:
            old = existing.get(d["name"])
            if old is not None:
                client.delete_recurring_run(old)
            schedule = {k: d[k] for k in ("cron_expression", "interval_second", "start_time") if k in d}
            with contextlib.redirect_stdout(io.StringIO()):
                made = client.create_recurring_run(
                    experiment_id=exp.experiment_id, job_name=d["name"], pipeline_package_path=str(ir),
                    params=d["params"] or None, max_concurrency=d["max_concurrency"], no_catchup=d["no_catchup"],
                    enabled=d["enabled"], **schedule)
            when = schedule.get("cron_expression") or f"every {schedule['interval_second']}s"
            state = "" if d["enabled"] else ", disabled"
            lines.append(f"{'replaced' if old else 'created'} recurring run {d['name']!r} ({when}{state}) "
                         f"in experiment {experiment!r}: {made.recurring_run_id}")
        return lines
    except InterlockError:
        raise
    except Exception as exc:  # kfp_server_api's ApiException, urllib3's connection errors
        raise RecurringRunError(f"pipeline {spec.name!r}: the KFP API at {host} refused the recurring runs: {exc}",
                                hint="check --option host= and that the KFP API answers (GET /apis/v2beta1/healthz)") \
            from exc


def _by_name(client: Any, experiment_id: str) -> dict[str, str]:
    """recurring run display name -> id, in the experiment (every page)."""
    out: dict[str, str] = {}
    token = ""
    while True:
        page = client.list_recurring_runs(experiment_id=experiment_id, page_token=token, page_size=100)
        for r in page.recurring_runs or []:
            out[r.display_name] = r.recurring_run_id
        token = page.next_page_token or ""
        if not token:
            return out
