"""parse_duration / format_duration: strict parsing, readable formatting, round trip."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlock.core.base.durations import format_duration, parse_duration
from interlock.core.base.errors import PolicyError


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1.5h", 5400.0),
        (".5m", 30.0),
        ("250ms", 0.25),
        ("1m500ms", 60.5),
        ("1d2h3m4s", 93784.0),
        (" 1h 30m ", 5400.0),
        ("0s", 0.0),
        (300, 300.0),
        (1.5, 1.5),
        (0, 0.0),
        (timedelta(minutes=5), 300.0),
    ],
)
def test_parse_accepts(value, seconds):
    assert parse_duration(value) == seconds
    assert isinstance(parse_duration(value), float)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("5 min", "cannot be read"),
        ("5M", "cannot be read"),
        ("30m1h", "out of order"),
        ("1h1h", "out of order"),
        ("300", "no unit"),
        ("", "empty"),
        ("   ", "empty"),
        ("1.h", "cannot be read"),
        ("-5m", "cannot be read"),
        ("5m garbage", "cannot be read"),
        (-1, "negative"),
        (timedelta(seconds=-1), "negative"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (True, "bool"),
        (None, "type NoneType"),
        ([5], "type list"),
    ],
)
def test_parse_rejects_naming_field_and_value(value, why):
    with pytest.raises(PolicyError) as err:
        parse_duration(value, "Backoff first")
    text = str(err.value)
    assert f"Backoff first={value!r}" in text
    assert why in text
    assert err.value.hint and "1h30m" in err.value.hint


def test_parse_error_without_field_name_still_names_value():
    with pytest.raises(PolicyError, match=r"duration '7x'"):
        parse_duration("7x")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (300, "5m"),
        (5400, "1h30m"),
        (0, "0s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (90061, "1d1h1m1s"),
        (60.5, "1m500ms"),
        (7200, "2h"),
        (-300, "-5m"),
        (timedelta(hours=1), "1h"),
        (float("inf"), "inf"),
    ],
)
def test_format(seconds, text):
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**12))
def test_format_parse_round_trip_at_millisecond_resolution(ms):
    seconds = ms / 1000
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, abs=1e-6)
