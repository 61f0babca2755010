"""``interlock watch``: evaluate a pipeline's triggers in a loop and start the runs they ask for.

Each evaluation, under the state file's lock: list the data locations whose poll interval has
passed, measure drift on the newest unchecked data, ask ``decide`` which runs to start, record
them (state first: a watcher killed mid-run never starts the same data's run again), then start
each through ``il.run`` on the chosen backend with ``triggered_by`` its cause. The clock and
the sleep are injected, so that tests run a simulated day in milliseconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import (
    as_runner,
    default_backend,
    default_workdir,
    get_backend,
    new_run_id,
)
from interlock.core.base.durations import parse_duration
from interlock.core.base.errors import InterlockError, WatchError
from interlock.core.dsl.pipeline import Pipeline
from interlock.core.dsl.pipeline import spec as spec_of
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.triggers import Cron, Every, OnData, OnDrift
from interlock.core.run.env import run_dir_under
from interlock.core.run.redact import Redactor
from interlock.core.run.state import run_in_progress
from interlock.core.watch.decide import Decision, Observed, Start, decide, episode, newest
from interlock.core.watch.drift import DriftResult, evaluate_drift
from interlock.core.watch.listing import list_objects
from interlock.core.watch.schedule import next_time
from interlock.core.watch.state import (
    StartedRun,
    WatchState,
    locked,
    read_state,
    state_path,
    write_state,
)

IDLE_S = 3600.0  # the longest sleep between evaluations when nothing is due sooner


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Started:
    run_id: str
    start: Start
    status: str = "started"  # then the run's status ("succeeded", "failed", ...)


@dataclass
class Evaluation:
    decision: Decision
    started: list[Started] = field(default_factory=list)


class Watcher:
    """The triggers of ``pipeline``, evaluated against ``<workdir>/watch/<pipeline>.json``.

    ``params``: parameter values every run gets (a trigger's inputs and bindings win);
    ``clock``/``sleep``: the time source and the wait (tests pass a fake clock);
    ``out``: where the one line per start goes; ``progress``: il.run's (False: quiet).
    """

    def __init__(
        self,
        pipeline: Pipeline | PipelineSpec,
        backend: str | None = None,
        *,
        workdir: str | os.PathLike[str] | None = None,
        params: Mapping[str, Any] | None = None,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] | None = None,
        out: Callable[[str], None] = print,
        progress: Any = False,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        import time

        self.pipeline = pipeline
        self.spec = spec_of(pipeline)
        if not self.spec.triggers:
            raise WatchError(f"pipeline {self.spec.name!r} has no triggers to watch",
                             hint="@il.pipeline(triggers=[il.Cron(...), il.OnData(...)]), docs/triggers.md")
        self.backend = backend or default_backend()
        self.workdir = Path(workdir) if workdir else default_workdir()
        self.params = dict(params or {})
        self.clock, self.sleep = clock, sleep or time.sleep
        self.out, self.progress, self.options = out, progress, options
        as_runner(self.spec, get_backend(self.backend))  # a compile-only or unknown backend fails now, not at the first start
        self.path = state_path(self.workdir, self.spec.name)
        # What the state file and the console get is masked as a run's receipt is: a data URI may hold a password.
        self.redact = Redactor.for_values({**self.spec.defaults(), **self.params})
        self._polled: dict[str, datetime] = {}  # per data/drift trigger, when this watcher last listed it

    # -- one evaluation ---------------------------------------------------------------------
    def observe(self, state: WatchState, now: datetime, *, poll_all: bool = False) -> Observed:
        seen = Observed(in_progress=frozenset(r.run_id for r in state.runs
                                              if run_in_progress(run_dir_under(self.workdir, r.run_id))))
        for i, trig in enumerate(self.spec.triggers):
            label = trig.label(i)
            if not isinstance(trig, OnData | OnDrift) or not trig.active:
                continue
            last = self._polled.get(label)
            if not poll_all and last is not None and (now - last).total_seconds() < parse_duration(trig.poll, "poll"):
                continue
            listing = list_objects(trig.uri, trig.pattern)
            self._polled[label] = now
            seen.listings[label] = listing
            obj = newest(listing) if isinstance(trig, OnDrift) else None
            if obj is not None and episode(obj) not in state.of(label).checked:
                result: DriftResult | str = evaluate_drift(trig, obj.uri, label)
                seen.drift[label] = result
        return seen

    def check(self, now: datetime | None = None) -> Decision:
        """What would start now and why; nothing is started and the state is not written."""
        now = now or self.clock()
        state = read_state(self.path, self.spec.name)
        return decide(self.spec.triggers, state, now, self.observe(state, now, poll_all=True))

    def evaluate(self, now: datetime | None = None) -> Evaluation:
        """One evaluation: decide under the lock, record the runs, then start them one by one."""
        now = now or self.clock()
        with locked(self.path):
            state = read_state(self.path, self.spec.name)
            decision = decide(self.spec.triggers, state, now, self.observe(state, now))
            started = [Started(new_run_id(self.spec.name), s) for s in decision.starts]
            decision.state.runs.extend(StartedRun(s.run_id, s.start.trigger, self.redact(s.start.cause.to_json()),
                                                  now.isoformat()) for s in started)
            write_state(self.path, decision.state)
        for s in started:
            self.out(f"interlock watch: starting run {s.run_id} of {self.spec.name} on {self.backend}: "
                     f"{self.redact.text(s.start.cause.summary())}")
            s.status = self._start(s)
            self.out(f"interlock watch: run {s.run_id} {s.status}")
        return Evaluation(decision, started)

    def _start(self, s: Started) -> str:
        from interlock.core.backend.api import run

        try:
            result = run(self.pipeline, self.backend, workdir=self.workdir, run_id=s.run_id, progress=self.progress,
                         raise_on_failure=False, options=self.options, triggered_by=s.start.cause,
                         **{**self.params, **s.start.params})
        except InterlockError as exc:  # refused before or failed outside its steps: the watcher keeps watching
            self.out(f"interlock watch: run {s.run_id} failed: {self.redact.text(str(exc))}")
            return "failed"
        return str(result.status)

    # -- the loop ---------------------------------------------------------------------------
    def wake_after(self, now: datetime) -> float:
        """Seconds until the next thing is due: a fire time or a poll."""
        waits = [IDLE_S]
        for i, trig in enumerate(self.spec.triggers):
            if not trig.active:
                continue
            if isinstance(trig, Cron | Every):
                nxt = next_time(trig, now)
                if nxt is not None:
                    waits.append((nxt - now).total_seconds())
            else:
                last = self._polled.get(trig.label(i), now)
                waits.append((last + timedelta(seconds=parse_duration(trig.poll, "poll")) - now).total_seconds())
        return max(0.0, min(waits))

    def watch(self, *, until: datetime | None = None, evaluations: int | None = None) -> list[Started]:
        """Evaluate, sleep until the next thing is due, repeat: until ``until`` (clock time) or
        after ``evaluations`` evaluations; by default for ever (Ctrl-C stops it). Watching for
        ever, a listing or registry that fails is reported and tried again at the next poll;
        a damaged state file stops the watcher."""
        started: list[Started] = []
        done = 0
        while True:
            now = self.clock()
            if until is not None and now > until:
                return started
            try:
                started.extend(self.evaluate(now).started)
            except WatchError as exc:
                if not exc.retryable or evaluations is not None:
                    raise
                # A location or a registry that does not answer now may next time: keep watching.
                self.out(f"interlock watch: {exc}; trying again at the next poll")
            done += 1
            if evaluations is not None and done >= evaluations:
                return started
            self.sleep(self.wake_after(self.clock()))
