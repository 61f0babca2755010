"""Time triggers over a simulated clock: the runs a Cron in a time zone starts over a day and
across both daylight-saving changes, Every's fixed rate, catch-up and the first evaluation."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import watch_pipelines as wp

import interlock as il
from interlock.core.watch.schedule import due_times
from interlock.core.watch.watcher import Watcher


def _receipt(workdir, run_id: str) -> dict:
    return json.loads((workdir / "runs" / run_id / "state" / "receipt.json").read_text())


def test_a_berlin_cron_starts_one_run_a_day_at_three_local_across_the_spring_change(tmp_path, clock) -> None:
    lines: list[str] = []
    watcher = Watcher(wp.nightly, "local", workdir=tmp_path, clock=clock, sleep=clock.sleep, out=lines.append)
    started = watcher.watch(until=datetime(2026, 3, 31, 0, 0, tzinfo=UTC))  # Sat noon to Tue: DST began Sunday

    assert [s.start.params["at"] for s in started] == [
        "2026-03-29T03:00:00+02:00",  # the first day of summer time: 01:00 UTC
        "2026-03-30T03:00:00+02:00",
    ]
    assert [s.status for s in started] == ["succeeded", "succeeded"]
    receipt = _receipt(tmp_path, started[0].run_id)
    assert receipt["parameters"]["at"] == "2026-03-29T03:00:00+02:00"
    assert receipt["triggered_by"] == {"trigger": "nightly", "kind": "cron", "time": "2026-03-29T03:00:00+02:00"}
    assert lines[0] == (f"interlock watch: starting run {started[0].run_id} of nightly on local: "
                        "cron trigger nightly at 2026-03-29T03:00:00+02:00")
    assert clock.slept > 0  # the loop waited on the injected sleep, for the simulated hours


def test_a_restarted_watcher_starts_no_time_twice(tmp_path, clock) -> None:
    first = Watcher(wp.nightly, "local", workdir=tmp_path, clock=clock, sleep=clock.sleep, out=lambda _: None)
    assert len(first.watch(until=datetime(2026, 3, 29, 2, tzinfo=UTC))) == 1
    again = Watcher(wp.nightly, "local", workdir=tmp_path, clock=clock, sleep=clock.sleep, out=lambda _: None)
    assert again.evaluate().started == []  # same state file: 03:00 is done
    clock.advance(days=1)
    assert [s.start.params["at"] for s in again.evaluate().started] == ["2026-03-30T03:00:00+02:00"]


def _day(expr: str, day: str) -> list[str]:
    """The UTC fire times of ``expr`` in Berlin over the local calendar day ``day``."""
    berlin = trig_tz()
    start = datetime.fromisoformat(day).replace(tzinfo=berlin)
    end = (start + timedelta(days=1)).replace(tzinfo=berlin)  # the next local midnight: 23 or 25 hours later
    trig = il.Cron(expr, tz="Europe/Berlin", catch_up=True)
    return [t.astimezone(UTC).strftime("%H:%M") for t in due_times(trig, start - timedelta(microseconds=1), end)
            if t < end.astimezone(UTC)]


def test_daylight_saving_moves_the_fire_times_as_the_clock_does() -> None:
    spring, autumn = "2026-03-29", "2026-10-25"
    assert _day("30 2 * * *", spring) == ["01:00"]  # 02:30 does not exist that night: it fires at the jump, 03:00
    assert _day("30 2 * * *", autumn) == ["00:30"]  # 02:30 happens twice: once
    assert len(_day("0 * * * *", spring)) == 23 and len(_day("0 * * * *", autumn)) == 25  # every real hour
    assert _day("0 3 * * *", spring) == ["01:00"] and _day("0 3 * * *", autumn) == ["02:00"]
    assert _day("0 3 * * *", "2026-03-28") == ["02:00"]  # the day before: still winter time


@pytest.mark.parametrize(("catch_up", "expected"), [(False, ["2026-03-28T15:00:00+01:00"]),
                                                    (True, [f"2026-03-28T{h}:00:00+01:00" for h in (13, 14, 15)])])
def test_after_a_pause_only_the_latest_time_fires_unless_catch_up(catch_up: bool, expected: list[str]) -> None:
    trig = il.Cron("0 * * * *", tz="Europe/Berlin", catch_up=catch_up)
    last = datetime(2026, 3, 28, 11, 30, tzinfo=UTC)
    got = due_times(trig, last, datetime(2026, 3, 28, 14, 10, tzinfo=UTC))
    assert [t.astimezone(trig_tz()).isoformat() for t in got] == expected


def trig_tz():  # type: ignore[no-untyped-def]
    from zoneinfo import ZoneInfo

    return ZoneInfo("Europe/Berlin")


def test_the_first_evaluation_starts_nothing_for_the_past(tmp_path, clock) -> None:
    watcher = Watcher(wp.sixhourly, "local", workdir=tmp_path, clock=clock, out=lambda _: None)
    first = watcher.evaluate()
    assert first.started == []
    assert "first evaluation" in first.decision.verdicts[0].why
    assert due_times(il.Every("6h", start="2026-03-28T00:00:00+00:00", catch_up=True), None,
                     datetime(2026, 3, 28, 13, tzinfo=UTC)) == [
        datetime(2026, 3, 28, h, tzinfo=UTC) for h in (0, 6, 12)]  # catch_up from an explicit start


def test_every_fires_on_its_fixed_rate_counted_from_the_epoch(tmp_path, clock) -> None:
    watcher = Watcher(wp.sixhourly, "local", workdir=tmp_path, clock=clock, sleep=clock.sleep, out=lambda _: None)
    started = watcher.watch(until=datetime(2026, 3, 29, 1, tzinfo=UTC))
    assert [s.start.params["at"] for s in started] == ["2026-03-28T18:00:00+00:00", "2026-03-29T00:00:00+00:00"]
    assert {s.start.cause.kind for s in started} == {"every"}
