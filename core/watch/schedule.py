"""When a ``Cron`` or an ``Every`` is due: the fire times in ``(last, now]``.

Cron fields are read in the trigger's time zone (croniter over zoneinfo), so daylight saving
moves them as a person reading the clock expects: a time the clock skips (02:30 on the spring
change in Europe) fires when the clock jumps (03:00), a job at a fixed hour fires once when the
clock repeats that hour in autumn, and an hourly job fires every real hour. ``Every`` counts
whole intervals from its ``start`` (default the Unix epoch, as the contract says), so every
watcher and backend agrees on the times whenever it started.

After a pause only the latest missed time fires, unless ``catch_up`` (then every one, at most
``MAX_CATCH_UP``). The first evaluation ever has no ``last``: nothing in the past fires, except
with ``catch_up`` an ``Every`` with an explicit ``start`` (its times since then).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from interlock.core.model.triggers import Cron, Every, parse_time

MAX_CATCH_UP = 1000  # a trigger paused for years must not start thousands of runs at once

_ALIASES = {
    "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
}


def cron_fields(expr: str) -> str:
    """The five fields of ``expr`` (an alias spelled out)."""
    return _ALIASES.get(expr.strip().lower(), expr)


def _cron_times(trig: Cron, after: datetime, until: datetime, limit: int) -> list[datetime]:
    from croniter import croniter

    tz = ZoneInfo(trig.tz)
    fields = cron_fields(trig.expr)
    fixed_hour = fields.split()[1] != "*"
    it = croniter(fields, after.astimezone(tz))
    out: list[datetime] = []
    while True:
        t = it.get_next(datetime)
        utc = t.astimezone(UTC)
        if utc > until:
            return out
        if fixed_hour and utc.astimezone(tz).fold == 1:
            continue  # the second pass of a repeated hour: a job at a fixed hour ran at the first
        if utc > after and (not out or utc > out[-1]):
            out.append(utc)
            if len(out) > limit:
                out.pop(0)


def _every_times(trig: Every, anchor: datetime, after: datetime, until: datetime, limit: int) -> list[datetime]:
    step = timedelta(seconds=trig.seconds)
    n_last = int((until - anchor) // step)
    if n_last < 0:
        return []
    n_first = max(0, int((after - anchor) // step) + 1)
    n_first = max(n_first, n_last - limit + 1)
    return [anchor + k * step for k in range(n_first, n_last + 1) if anchor + k * step > after]


def anchor_of(trig: Every) -> datetime:
    return parse_time(trig.start, "Every start") if trig.start else datetime(1970, 1, 1, tzinfo=UTC)


def due_times(trig: Any, last: datetime | None, now: datetime) -> list[datetime]:
    """The times ``trig`` fires in ``(last, now]`` (UTC), oldest first: all of them with
    ``catch_up``, else only the latest. ``last`` None: the trigger's first evaluation."""
    now = now.astimezone(UTC)
    limit = MAX_CATCH_UP if trig.catch_up else 1
    if last is None:
        if not (trig.catch_up and isinstance(trig, Every) and trig.start):
            return []
        last = anchor_of(trig) - timedelta(microseconds=1)  # the start itself is a fire time
    last = last.astimezone(UTC)
    if now <= last:
        return []
    if isinstance(trig, Cron):
        return _cron_times(trig, last, now, limit)
    if isinstance(trig, Every):
        return _every_times(trig, anchor_of(trig), last, now, limit)
    raise TypeError(f"{type(trig).__name__} is not a time trigger")


def next_time(trig: Any, now: datetime) -> datetime | None:
    """When ``trig`` next fires after ``now`` (for ``interlock triggers check``)."""
    now = now.astimezone(UTC)
    if isinstance(trig, Cron):
        from croniter import croniter

        t: datetime = croniter(cron_fields(trig.expr), now.astimezone(ZoneInfo(trig.tz))).get_next(datetime)
        return t.astimezone(UTC)
    if isinstance(trig, Every):
        anchor, step = anchor_of(trig), timedelta(seconds=trig.seconds)
        if now < anchor:
            return anchor
        return anchor + (int((now - anchor) // step) + 1) * step
    return None


def local_iso(trig: Any, t: datetime) -> str:
    """``t`` as the ISO 8601 text a run gets (``time_input``): in a Cron's own zone, with its offset."""
    tz = ZoneInfo(trig.tz) if isinstance(trig, Cron) else UTC
    return t.astimezone(tz).isoformat()
