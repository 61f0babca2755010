"""The rules of ``decide`` as properties over random histories (hypothesis): a data version
starts at most one run, ever, whatever the order of landings, rewrites, runs in progress and
restarts (the state read back from its JSON), and every version still listed once nothing is
in progress has started its run; with catch_up, every fire time of a cron starts exactly once
across irregular evaluations, restarts and the autumn clock change."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

import interlock as il
from interlock.core.watch.decide import Observed, decide
from interlock.core.watch.listing import Listed
from interlock.core.watch.state import WatchState

TRIGGER = il.OnData("/inbox", uri_input="snapshot", catch_up=True, max_concurrent=2, name="landed")
EVENTS = st.lists(st.tuples(st.sampled_from(["land", "rewrite", "evaluate", "restart", "busy"]), st.integers(0, 4)),
                  max_size=40)


@settings(max_examples=150, deadline=None, database=None)  # nothing written in the checkout
@given(EVENTS)
def test_a_data_version_starts_at_most_one_run_and_every_listed_one_starts(events) -> None:  # type: ignore[no-untyped-def]
    objects: dict[str, int] = {}  # uri -> version number
    state = WatchState("p")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    started: list[tuple[str, str]] = []
    busy: frozenset[str] = frozenset()

    def evaluate() -> None:
        nonlocal state, now
        now += timedelta(minutes=1)
        listing = [Listed(uri, f"v{v}") for uri, v in sorted(objects.items())]
        decision = decide((TRIGGER,), state, now, Observed(listings={"landed": listing}, in_progress=busy))
        for s in decision.starts:
            version = next(o.version for o in listing if o.uri == s.params["snapshot"])
            started.append((s.params["snapshot"], version))
            decision.state.runs.append(_run(len(started), s))
        state = decision.state

    for kind, n in events:
        uri = f"/inbox/s{n}.parquet"
        if kind == "land":
            objects.setdefault(uri, 0)
        elif kind == "rewrite" and uri in objects:
            objects[uri] += 1
        elif kind == "evaluate":
            evaluate()
        elif kind == "restart":  # a new watcher: the state as read back from its file
            state = WatchState.from_json(json.loads(json.dumps(state.to_json())), "p")
        elif kind == "busy":  # the trigger's runs held by their locks (or released)
            busy = frozenset(r.run_id for r in state.runs) if not busy else frozenset()
        assert len(started) == len(set(started)), f"a data version started twice: {started}"

    busy = frozenset()
    for _ in range(len(objects) + 1):  # max_concurrent=2: what waited starts over the next evaluations
        evaluate()
    assert {(u, f"v{v}") for u, v in objects.items()} <= set(started)
    assert len(started) == len(set(started))


def _run(i: int, start):  # type: ignore[no-untyped-def]
    from interlock.core.watch.state import StartedRun

    return StartedRun(f"r{i}", start.trigger, start.cause.to_json(), "t")


HOURLY_TZ = ZoneInfo("Europe/Berlin")
HOURLY = il.Cron("0 * * * *", tz="Europe/Berlin", catch_up=True, max_concurrent=3, time_input="at", name="hourly")


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(1, 600), st.booleans()), min_size=1, max_size=30))
def test_with_catch_up_every_fire_time_starts_exactly_once(steps) -> None:  # type: ignore[no-untyped-def]
    now = datetime(2026, 10, 24, 20, 0, tzinfo=UTC)  # the evening before the autumn change
    first = now
    state = WatchState("p")
    fired: list[str] = []

    def evaluate() -> int:
        nonlocal state
        decision = decide((HOURLY,), state, now, Observed())
        fired.extend(s.params["at"] for s in decision.starts)
        state = decision.state
        return len(decision.starts)

    evaluate()  # the first evaluation: nothing for the past
    for minutes, restart in steps:
        now += timedelta(minutes=minutes)
        if restart:
            state = WatchState.from_json(json.loads(json.dumps(state.to_json())), "p")
        evaluate()
    while evaluate():  # three a time (max_concurrent): what waited starts next
        pass
    hours = int((now - first).total_seconds() // 3600)
    expected = [(first + timedelta(hours=h)).astimezone(HOURLY_TZ).isoformat() for h in range(1, hours + 1)]
    assert fired == expected

