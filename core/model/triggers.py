"""What starts a pipeline by itself: ``Cron``, ``Every``, ``OnData`` and ``OnDrift``, as frozen data.

``@il.pipeline(triggers=[...])`` holds them in the spec; each backend renders them natively
(a Flyte launch plan, an Airflow schedule, an Argo CronWorkflow, a KFP recurring run) or says
it cannot, and ``interlock watch`` evaluates them with no orchestrator. This module is only
the contract: what each trigger is, what it passes to the run, and the checks against the
pipeline's parameters that every backend relies on.

Every trigger passes ``inputs`` (constant parameter values, e.g. ``{"mode": "tune"}``) and may
bind what caused it to a parameter: the scheduled time (``time_input``, an ISO 8601 string
with the trigger's offset), the new object's URI (``uri_input``) or the drift figures
(``figures_input``, a dict). ``active=False`` compiles the trigger switched off (a paused
launch plan or schedule). ``catch_up``: after a pause, start the missed times (or, for data,
the objects already there when watching starts). ``max_concurrent``: runs of this trigger at
once (the run lock keeps one run per run id in any case).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields
from datetime import timedelta
from typing import Any, ClassVar

from interlock.core.base.errors import PipelineDefinitionError, PolicyError

Duration = str | int | float | timedelta


def _pairs(value: Any, what: str) -> tuple[tuple[str, Any], ...]:
    if value is None:
        return ()
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return tuple(sorted(value))
    if not isinstance(value, dict):
        raise PolicyError(f"{what} must be a dict of parameter values, not {value!r}")
    return tuple(sorted(value.items()))


@dataclass(frozen=True, kw_only=True)
class _Trigger:
    kind: ClassVar[str]
    # Which parameter takes what caused the run; the attribute names each kind binds.
    binds: ClassVar[tuple[str, ...]] = ()

    inputs: Any = ()  # a dict given; held as sorted (name, value) pairs so the trigger stays hashable
    active: bool = True
    catch_up: bool = False
    max_concurrent: int = 1
    name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _pairs(self.inputs, f"{self.kind} inputs"))
        if isinstance(self.max_concurrent, bool) or not isinstance(self.max_concurrent, int) or self.max_concurrent < 1:
            raise PolicyError(f"{self.kind} max_concurrent={self.max_concurrent!r} must be an int >= 1")
        for attr in ("active", "catch_up"):
            if not isinstance(getattr(self, attr), bool):
                raise PolicyError(f"{self.kind} {attr}={getattr(self, attr)!r} must be True or False")
        if self.name is not None:
            from interlock.core.model.names import check_step_name

            check_step_name(self.name, what="trigger")

    @property
    def input_values(self) -> dict[str, Any]:
        return dict(self.inputs)

    def bound_params(self) -> dict[str, str]:
        """What this trigger binds, by parameter: {"snapshot": "uri_input", ...}."""
        return {getattr(self, b): b for b in self.binds if getattr(self, b) is not None}

    def label(self, index: int) -> str:
        """The trigger's name, or ``<kind>-<index>`` (``cron-0``): its key in watch state and compiled specs."""
        return self.name or f"{self.kind}-{index}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "inputs":
                value = dict(value)
            elif isinstance(value, timedelta):
                value = value.total_seconds()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


@dataclass(frozen=True)
class Cron(_Trigger):
    """Start on a cron schedule: ``il.Cron("0 3 * * 1", tz="Europe/Berlin", time_input="as_of")``.

    ``expr``: five cron fields or an alias (``@daily``, ``@hourly``, ``@weekly``, ``@monthly``);
    ``tz``: the IANA time zone the fields are read in (daylight saving included).
    """

    kind: ClassVar[str] = "cron"
    binds: ClassVar[tuple[str, ...]] = ("time_input",)

    expr: str
    _: KW_ONLY
    tz: str = "UTC"
    time_input: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_cron(self.expr)
        check_time_zone(self.tz)


@dataclass(frozen=True)
class Every(_Trigger):
    """Start at a fixed rate: ``il.Every("6h")``, counted from ``start`` (an ISO 8601 time,
    default the Unix epoch in UTC) so that every watcher and backend agrees on the times."""

    kind: ClassVar[str] = "every"
    binds: ClassVar[tuple[str, ...]] = ("time_input",)

    interval: Duration
    _: KW_ONLY
    start: str | None = None
    time_input: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        from interlock.core.base.durations import parse_duration

        if parse_duration(self.interval, "Every interval") < 60:
            raise PolicyError(f"Every interval={self.interval!r} is under a minute",
                              hint="schedulers tick once a minute: write \"1m\" or more")
        if self.start is not None:
            parse_time(self.start, "Every start")

    @property
    def seconds(self) -> float:
        from interlock.core.base.durations import parse_duration

        return parse_duration(self.interval, "Every interval")


@dataclass(frozen=True)
class OnData(_Trigger):
    """Start when a new object lands under ``uri`` (a prefix: ``s3://bucket/snapshots/``, a local
    folder), one run per new object, its URI bound to ``uri_input``. ``pattern`` filters object
    names (a glob on the part after the prefix); ``poll`` is how often ``interlock watch`` lists."""

    kind: ClassVar[str] = "data"
    binds: ClassVar[tuple[str, ...]] = ("uri_input",)

    uri: str
    _: KW_ONLY
    pattern: str = "*"
    uri_input: str | None = None
    poll: Duration = "1m"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.uri, str) or not self.uri:
            raise PolicyError(f"OnData uri={self.uri!r} must be a non-empty URI or path")
        from interlock.core.base.durations import parse_duration

        parse_duration(self.poll, "OnData poll")


@dataclass(frozen=True)
class OnDrift(_Trigger):
    """Start when the newest data under ``uri`` has drifted from the training data of the
    registry's champion (``model``, its snapshot read from the champion's receipt and tags).

    Per feature (``features``: all shared columns when None): the population stability index
    for binned and categorical features, the Kolmogorov-Smirnov statistic for continuous ones;
    a run starts when any feature's PSI reaches ``psi`` or its KS statistic reaches ``ks``.
    The figures go to ``figures_input`` (a dict parameter) and the newest data's URI to
    ``uri_input``; one run per drift episode (the same newest data never starts two).
    ``registry``: where the registry plugin finds ``model`` (an MLflow tracking URI or store
    folder; empty: its default).
    """

    kind: ClassVar[str] = "drift"
    binds: ClassVar[tuple[str, ...]] = ("uri_input", "figures_input")

    uri: str
    _: KW_ONLY
    model: str
    registry: str = ""
    features: tuple[str, ...] | None = None
    psi: float = 0.2
    ks: float = 0.1
    pattern: str = "*"
    uri_input: str | None = None
    figures_input: str | None = None
    poll: Duration = "1h"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.features is not None:
            object.__setattr__(self, "features", tuple(self.features))
        for attr in ("psi", "ks"):
            v = getattr(self, attr)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise PolicyError(f"OnDrift {attr}={v!r} must be a number above 0")
        if self.ks >= 1:
            raise PolicyError(f"OnDrift ks={self.ks!r}: the KS statistic is between 0 and 1")
        from interlock.core.base.durations import parse_duration

        parse_duration(self.poll, "OnDrift poll")


Trigger = Cron | Every | OnData | OnDrift
KINDS: dict[str, type[_Trigger]] = {t.kind: t for t in (Cron, Every, OnData, OnDrift)}
# The capability each kind needs (core/backend/protocol.py FEATURES).
FEATURE = {kind: f"trigger.{kind}" for kind in KINDS}


def trigger_from_json(d: dict[str, Any]) -> Any:
    d = dict(d)
    cls = KINDS[d.pop("kind")]
    if d.get("features") is not None:
        d["features"] = tuple(d["features"])
    return cls(**d)


def check_cron(expr: str) -> None:
    from croniter import croniter

    if not isinstance(expr, str) or not croniter.is_valid(expr) or len(expr.split()) not in (1, 5):
        raise PolicyError(
            f"cron {expr!r} is not a five-field cron expression",
            hint='write "minute hour day-of-month month day-of-week", e.g. "0 3 * * *", or @daily/@hourly/@weekly',
        )


def check_time_zone(tz: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise PolicyError(f"time zone {tz!r} is unknown", hint='an IANA name, e.g. "UTC", "Europe/Berlin"') from exc


def parse_time(text: str, what: str) -> Any:
    from datetime import UTC, datetime

    try:
        t = datetime.fromisoformat(text)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"{what}={text!r} is not an ISO 8601 time", hint='e.g. "2026-01-01T00:00:00+00:00"') from exc
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def check_triggers(triggers: tuple[Any, ...], params: dict[str, Any], pipeline: str) -> None:
    """Each trigger's inputs and bound parameters against the pipeline's parameters (``params``:
    name -> Port), and every parameter without a default given by each trigger."""
    from interlock.core.model.codecs import TypeKind, value_matches

    seen: set[str] = set()
    for i, trig in enumerate(triggers):
        if not isinstance(trig, _Trigger):
            raise PipelineDefinitionError(
                f"triggers[{i}] is {trig!r}, not a trigger", pipeline=pipeline,
                hint="il.Cron(...), il.Every(...), il.OnData(...) or il.OnDrift(...)",
            )
        label = trig.label(i)
        if label in seen:
            raise PipelineDefinitionError(f"two triggers are named {label!r}", pipeline=pipeline,
                                          hint="give each trigger its own name=")
        seen.add(label)
        bound = trig.bound_params()
        for pname in [*dict(trig.inputs), *bound]:
            if pname not in params:
                raise PipelineDefinitionError(
                    f"trigger {label!r} sets {pname!r}, which is not a parameter of the pipeline",
                    pipeline=pipeline, port=pname, hint=f"parameters: {', '.join(sorted(params)) or '(none)'}",
                )
        for pname, value in trig.inputs:
            if pname in bound:
                raise PipelineDefinitionError(f"trigger {label!r} sets {pname!r} twice (inputs and {bound[pname]})",
                                              pipeline=pipeline, port=pname)
            if not value_matches(value, params[pname].type):
                raise PipelineDefinitionError(
                    f"trigger {label!r} gives {pname}={value!r}, not a {params[pname].type.describe()}",
                    pipeline=pipeline, port=pname,
                )
        for pname, attr in bound.items():
            want = TypeKind.DICT if attr == "figures_input" else TypeKind.STR
            if params[pname].type.kind is not want:
                raise PipelineDefinitionError(
                    f"trigger {label!r} binds its {attr.removesuffix('_input')} to {pname!r}, "
                    f"a {params[pname].type.describe()} parameter: it must be a {want.value}",
                    pipeline=pipeline, port=pname,
                )
        given = {*dict(trig.inputs), *bound}
        missing = [p for p, port in params.items() if not port.has_default and p not in given]
        if missing:
            raise PipelineDefinitionError(
                f"trigger {label!r} leaves {', '.join(map(repr, missing))} without a value "
                "(no default, not in its inputs)",
                pipeline=pipeline, port=missing[0], hint=f"inputs={{{missing[0]!r}: ...}}, or a default",
            )


SUMMARY_FIGURES = 3  # drift figures in a cause's one-line summary


@dataclass(frozen=True)
class Cause:
    """Why a run started, for its receipt (``triggered_by``), console line and MLflow tags:
    the trigger's label and kind, the time it fired (ISO 8601), the data URI, drift figures."""

    trigger: str
    kind: str
    time: str
    uri: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trigger": self.trigger, "kind": self.kind, "time": self.time}
        if self.uri is not None:
            out["uri"] = self.uri
        if self.figures:
            out["figures"] = self.figures
        return out

    def summary(self) -> str:
        """One line: ``cron trigger nightly at 2026-03-29T03:00:00+02:00``, ``data trigger
        snapshots: /data/s.parquet``, ``drift trigger drift-2: /data/s.parquet (amount psi=0.31)``
        (the largest drift figures first; the receipt and the report have them all)."""
        line = f"{self.kind} trigger {self.trigger}"
        if self.uri is None:
            return f"{line} at {self.time}"
        line = f"{line}: {self.uri}"
        figures = sorted(((v, f"{name} {k}={v:.3g}") for name, stats in self.figures.items() if isinstance(stats, dict)
                          for k, v in stats.items() if isinstance(v, int | float)), key=lambda f: -f[0])
        shown = [text for _, text in figures[:SUMMARY_FIGURES]]  # the largest: what crossed a threshold
        if len(figures) > SUMMARY_FIGURES:
            shown.append(f"{len(figures) - SUMMARY_FIGURES} more")
        return f"{line} ({', '.join(shown)})" if shown else line

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Cause:
        return cls(d["trigger"], d["kind"], d["time"], d.get("uri"), dict(d.get("figures") or {}))
