"""The pipeline's time triggers as ``flyte.Trigger`` objects on the driver task, as source text.

A Flyte 2 user writes ``@env.task(triggers=flyte.Trigger(name, flyte.Cron(expr, timezone=tz),
inputs={"as_of": flyte.TriggerTime, ...}, auto_activate=...))``; each il.Cron / il.Every
becomes one, named ``<pipeline>-<label>``. What a Flyte 2 trigger cannot hold (catch-up, a
rate that is not whole minutes) is refused naming the
trigger; data and drift triggers are refused by the backend's capabilities.
"""

from __future__ import annotations

from typing import Any

from interlock.core.base.errors import CapabilityError
from interlock.core.model.pipeline_spec import PipelineSpec


def _refuse(spec: PipelineSpec, label: str, what: str, hint: str) -> CapabilityError:
    return CapabilityError(f"trigger {label!r}: {what}", pipeline=spec.name, step=label, hint=hint)


def automation(spec: PipelineSpec, trig: Any, label: str) -> str:
    """``flyte.Cron(...)`` or ``flyte.FixedRate(...)`` for one trigger, as source."""
    if trig.kind == "every":
        minutes, rest = divmod(trig.seconds, 60)
        if rest:
            raise _refuse(spec, label, f"a flyte.FixedRate counts whole minutes, not {trig.interval!r}",
                          "write the interval in minutes (\"90m\", \"6h\")")
        start = f", start_time=datetime.fromisoformat({trig.start!r})" if trig.start else ""
        return f"flyte.FixedRate({int(minutes)}{start})"
    tz = f", timezone={trig.tz!r}" if trig.tz != "UTC" else ""
    return f"flyte.Cron({trig.expr!r}{tz})"


def trigger_sources(spec: PipelineSpec, name: str) -> list[str]:
    """One ``flyte.Trigger(...)`` expression per time trigger; ``name``: the pipeline's name as
    a Flyte 2 name (kebab case)."""
    out = []
    for i, trig in enumerate(spec.triggers):
        if trig.kind not in ("cron", "every"):
            continue  # refused by the capability check before compile
        label = trig.label(i)
        if trig.catch_up:
            raise _refuse(spec, label, "a flyte.Trigger has no catch-up: the platform starts the times from "
                          "activation on", "drop catch_up=True for --backend flyte2, or compile for airflow or argo")
        inputs = [f"{trig.time_input!r}: flyte.TriggerTime"] if trig.time_input else []
        inputs += [f"{k!r}: {input_text(spec, k, v)}" for k, v in trig.inputs]
        args = [repr(f"{name}-{label}"), automation(spec, trig, label)]
        if inputs:
            args.append(f"inputs={{{', '.join(inputs)}}}")
        if not trig.active:
            args.append("auto_activate=False")
        out.append(f"flyte.Trigger({', '.join(args)})")
    return out


def time_params(spec: PipelineSpec) -> set[str]:
    """The parameters a time trigger binds its fire time to (``time_input``)."""
    return {t.time_input for t in spec.triggers if t.kind in ("cron", "every") and t.time_input}


def input_text(spec: PipelineSpec, name: str, value: Any) -> str:
    """A trigger input as source, in the driver's form: a primitive as it is, any other value as
    the JSON text the driver's ``str`` parameter takes (as the parameter defaults are written)."""
    import json

    from interlock.core.model.codecs import to_jsonable

    from .render import PRIMITIVES

    t = next(p.type for p in spec.params if p.name == name)
    return repr(value) if t.kind in PRIMITIVES else repr(json.dumps(to_jsonable(value, t)))
