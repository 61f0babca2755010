"""Durations as people write them in policies: "30s", "5m", "1h30m", "2d", or plain seconds.

Parsing is strict on purpose: a typo such as "5 min" or "30m1h" raises ``PolicyError`` when
the policy is written, instead of turning into a surprising wait on a cluster later.
"""

from __future__ import annotations

import re
from datetime import timedelta

from interlock.core.base.errors import PolicyError

# Largest unit first; a duration string must list its parts in this order, each at most once.
_UNITS: tuple[tuple[str, float], ...] = (
    ("d", 86400.0),
    ("h", 3600.0),
    ("m", 60.0),
    ("s", 1.0),
    ("ms", 0.001),
)
_UNIT_SECONDS = dict(_UNITS)
_UNIT_RANK = {u: i for i, (u, _) in enumerate(_UNITS)}
# "ms" before "m" and "s" so that "250ms" is not read as 250 minutes followed by "s".
_PART = re.compile(r"\s*(?P<num>[0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*(?P<unit>ms|d|h|m|s)(?![A-Za-z])")

_EXAMPLES = 'write e.g. "30s", "5m", "1h30m", "2d", "250ms", or a number of seconds'


def timedelta_seconds(value: object) -> float | None:
    """``value.total_seconds()`` for a ``datetime.timedelta`` (or a subclass), else None."""
    return value.total_seconds() if isinstance(value, timedelta) else None


def _fail(value: object, what: str | None, why: str) -> PolicyError:
    name = f"{what}={value!r}" if what else f"duration {value!r}"
    return PolicyError(f"{name} {why}", hint=_EXAMPLES)


def parse_duration(value: str | int | float | timedelta, what: str | None = None) -> float:
    """Return ``value`` as seconds (float).

    Accepts a non-negative number of seconds, a ``timedelta``, or a string of one or more
    ``<number><unit>`` parts with units d, h, m, s, ms, largest first ("1h30m", "1.5h").
    ``what`` names the field in the error message (``PolicyError``).
    """
    if isinstance(value, bool):  # bool is an int; True seconds is never meant
        raise _fail(value, what, "is a bool, not a duration")
    if (td := timedelta_seconds(value)) is not None:
        seconds = td
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value, what)
    else:
        raise _fail(value, what, f"has type {type(value).__name__}; expected str, number or timedelta")
    if not seconds - seconds == 0:  # nan, inf (math.isfinite without loading math in every task)
        raise _fail(value, what, "is not a finite duration")
    if seconds < 0:
        raise _fail(value, what, "is negative")
    return seconds


def _parse_text(text: str, what: str | None) -> float:
    stripped = text.strip()
    if not stripped:
        raise _fail(text, what, "is empty")
    pos, total, last_rank = 0, 0.0, -1
    while pos < len(stripped):
        m = _PART.match(stripped, pos)
        if not m:
            if re.fullmatch(r"[0-9.]+", stripped):
                raise _fail(text, what, "has no unit")
            raise _fail(text, what, f"cannot be read at {stripped[pos:]!r}")
        unit = m.group("unit")
        rank = _UNIT_RANK[unit]
        if rank <= last_rank:
            raise _fail(text, what, f"lists {unit!r} out of order or twice; largest unit first")
        last_rank = rank
        total += float(m.group("num")) * _UNIT_SECONDS[unit]
        pos = m.end()
    return total


_INF = float("inf")


def format_duration(seconds: float | int | timedelta) -> str:
    """Format seconds for messages: 300 -> "5m", 5400 -> "1h30m", 1.5 -> "1.5s", 0.25 -> "250ms".

    Rounded to the millisecond; ``parse_duration(format_duration(x))`` gives ``x`` back for
    any ``x`` with millisecond resolution.
    """
    seconds = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
    if seconds != seconds:  # nan
        return "nan"
    if seconds in (_INF, -_INF):
        return "inf" if seconds > 0 else "-inf"
    sign = "-" if seconds < 0 else ""
    ms = round(abs(seconds) * 1000)
    if ms == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    if ms:
        whole, frac = divmod(ms, 1000)
        if whole and frac:
            parts.append(f"{whole}.{frac:03d}".rstrip("0") + "s")
        elif whole:
            parts.append(f"{whole}s")
        else:
            parts.append(f"{frac}ms")
    return sign + "".join(parts)
