"""Which runs the triggers start now: a pure function of the triggers, the state, the time and
what was observed (listings, drift figures, runs in progress).

The rules every caller relies on: a time trigger fires each due time once; a data version
starts at most one run, ever; a drift episode (the newest data, by URI and version) is
checked once and starts at most one run; a trigger never has more than ``max_concurrent``
of its runs in progress, and what it could not start waits for the next evaluation.
``interlock triggers check`` calls the same function and prints the verdicts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from interlock.core.model.triggers import Cause, Cron, Every, OnData, OnDrift
from interlock.core.run.redact import DEFAULT as DEFAULT_REDACTOR
from interlock.core.watch.drift import DriftResult
from interlock.core.watch.listing import Listed
from interlock.core.watch.schedule import due_times, local_iso, next_time
from interlock.core.watch.state import WatchState


@dataclass(frozen=True)
class Start:
    """One run to start: which trigger, why, and its parameters (the trigger's inputs and what it binds)."""

    trigger: str
    cause: Cause
    params: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """What one trigger does now, in words (``triggers check``)."""

    trigger: str
    kind: str
    starts: int
    why: str


@dataclass
class Observed:
    """What the watcher saw this evaluation. A data or drift trigger without a listing was
    not polled (its poll interval has not passed); ``drift``: per trigger, the newest data's
    result, or why there is none (no champion yet)."""

    listings: dict[str, list[Listed]] = field(default_factory=dict)
    drift: dict[str, DriftResult | str] = field(default_factory=dict)
    in_progress: frozenset[str] = frozenset()  # run ids whose run lock is held


@dataclass
class Decision:
    starts: list[Start]
    verdicts: list[Verdict]
    state: WatchState


def state_key(uri: str) -> str:
    """How the state file names an object: its URI with any password masked (the file is kept)."""
    return DEFAULT_REDACTOR.text(uri)


def episode(obj: Listed) -> str:
    return f"{state_key(obj.uri)}@{obj.version}"


def newest(listing: list[Listed]) -> Listed | None:
    """The newest object: the last in name order (date-named snapshots sort by date)."""
    return max(listing) if listing else None


def _params(trig: Any, **bound: Any) -> dict[str, Any]:
    out = dict(trig.input_values)
    for attr, value in bound.items():
        name = getattr(trig, attr, None)
        if name is not None:
            out[name] = value
    return out


def decide(triggers: tuple[Any, ...], state: WatchState, now: datetime, observed: Observed) -> Decision:
    """The runs to start and the state after starting them (``state`` itself is not changed)."""
    now = now.astimezone(UTC)
    new = copy.deepcopy(state)
    starts: list[Start] = []
    verdicts: list[Verdict] = []
    for i, trig in enumerate(triggers):
        label = trig.label(i)
        ts = new.of(label)

        def say(why: str, n: int = 0, label: str = label, kind: str = trig.kind) -> None:
            verdicts.append(Verdict(label, kind, n, why))

        if not trig.active:
            say("inactive (active=False)")
            continue
        running = [r.run_id for r in new.runs_of(label) if r.run_id in observed.in_progress]
        room = trig.max_concurrent - len(running)
        if room <= 0:
            say(f"{len(running)} of its runs still in progress ({', '.join(running)}; max_concurrent={trig.max_concurrent})")
            continue
        if isinstance(trig, Cron | Every):
            first = ts.last is None
            times = due_times(trig, ts.last, now)
            fire = times[:room]
            for t in fire:
                iso = local_iso(trig, t)
                starts.append(Start(label, Cause(label, trig.kind, iso), _params(trig, time_input=iso)))
            ts.last = fire[-1] if len(fire) < len(times) else now  # what did not fit starts next time
            nxt = next_time(trig, now)
            after = f"; next at {local_iso(trig, nxt)}" if nxt else ""
            if fire:
                held = f" ({len(times) - len(fire)} more wait: max_concurrent={trig.max_concurrent})" if len(fire) < len(times) else ""
                say(f"due at {', '.join(local_iso(trig, t) for t in fire)}{held}", len(fire))
            elif first:
                say(f"first evaluation: starts nothing for the past (catch_up={trig.catch_up}){after}")
            else:
                say(f"not due{after}")
        elif isinstance(trig, OnData):
            listing = observed.listings.get(label)
            if listing is None:
                say(f"not polled now (every {trig.poll})")
                continue
            if ts.seen is None and not trig.catch_up:
                ts.seen = {state_key(o.uri): o.version for o in listing}
                ts.last = now
                say(f"first listing of {trig.uri}: {len(listing)} object(s) already there count as seen (catch_up=False)")
                continue
            seen = ts.seen if ts.seen is not None else {}
            fresh = [o for o in listing if seen.get(state_key(o.uri)) != o.version]
            for o in fresh[:room]:
                starts.append(Start(label, Cause(label, trig.kind, now.isoformat(), uri=o.uri), _params(trig, uri_input=o.uri)))
                seen[state_key(o.uri)] = o.version
            ts.seen, ts.last = seen, now
            if fresh:
                held = f"; {len(fresh) - room} more wait (max_concurrent={trig.max_concurrent})" if len(fresh) > room else ""
                kinds = ["changed" if state_key(o.uri) in (state.of(label).seen or {}) else "new" for o in fresh[:room]]
                say("; ".join(f"{k} object {o.uri}" for k, o in zip(kinds, fresh[:room], strict=True)) + held, min(room, len(fresh)))
            else:
                say(f"nothing new under {trig.uri} ({len(listing)} object(s) seen)")
        elif isinstance(trig, OnDrift):
            listing = observed.listings.get(label)
            if listing is None:
                say(f"not polled now (every {trig.poll})")
                continue
            obj = newest(listing)
            if obj is None:
                say(f"no data under {trig.uri} yet")
                continue
            key = episode(obj)
            if key in ts.checked:
                say(f"newest data {obj.uri} already checked ({'drifted: its run started' if ts.checked[key] else 'no drift'})")
                continue
            result = observed.drift.get(label)
            if result is None:
                say(f"newest data {obj.uri} not measured yet")
                continue
            if isinstance(result, str):
                say(result)
                continue
            ts.checked[key] = result.drifted
            ts.last = now
            figures = result.figures_only()
            thresholds = f"(thresholds: psi {trig.psi:g}, ks {trig.ks:g})"
            if not result.drifted:
                say(f"no drift in {obj.uri}: {_figures_text(figures)} {thresholds}")
                continue
            cause = Cause(label, trig.kind, now.isoformat(), uri=obj.uri, figures=figures)
            starts.append(Start(label, cause, _params(trig, uri_input=obj.uri, figures_input=figures)))
            say(f"drift in {obj.uri}: {', '.join(result.crossed())} {thresholds}", 1)
        else:  # check_triggers refused anything else at build
            say(f"unknown trigger kind {trig.kind!r}")
    return Decision(starts, verdicts, new)


def _figures_text(figures: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{name} {k}={v:.3g}" for name, stats in figures.items() for k, v in stats.items()) or "no shared features"
