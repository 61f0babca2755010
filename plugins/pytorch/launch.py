"""Running the ranks of a distributed step and judging how they ended, backend-neutral.

Shared by the KFP launcher (a TrainJob/PyTorchJob on a cluster, local processes on
kfp-local) and the ``local`` backend (local processes): the local process group that
torchrun would start, the supervision loop, and the verdict drawn from what the ranks
recorded (their receipt fragments and FATAL markers under ``<state_dir>/ranks/<rank>``).
Never imports torch: the ranks do, in their own processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from interlock.core.base.errors import StepFailed, StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.failure.record import Failure
from interlock.core.model.spec import StepSpec
from interlock.core.run.records import Attempt, Fragment, StopMarker
from interlock.core.run.state import RunContext, RunState

_SEVERITY = {FailureKind.FATAL: 0, FailureKind.PREEMPTED: 1, FailureKind.CONTENTION: 2, FailureKind.TRANSIENT: 3}


class LocalTemplate(Protocol):
    """What LocalRanks needs of a job template (kfp's JobTemplate, or the local backend's)."""

    node: str
    world_size: int
    env: Mapping[str, str]


@dataclass(frozen=True)
class JobEnd:
    """How the ranks ended, as the controller (or the local supervisor) saw it."""

    succeeded: bool
    reason: str = ""
    message: str = ""
    reclaimed: bool = False  # a node or rank was taken away (eviction, spot reclaim, SIGKILL)
    stopped: str | None = None  # the signal that told interlock itself to stop (off a cluster)


class Ranks(Protocol):
    """A running set of ranks: a Kubernetes job or local processes."""

    name: str

    def start(self) -> None: ...
    def poll(self) -> tuple[str, JobEnd | None]: ...  # (state to report, end when finished)
    def stop(self) -> None: ...


# -- the ranks as local processes (kfp-local, local) ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRanks:
    """The ranks as local processes, the environment torchrun would give them (one node).

    When a rank exits with an error the others are stopped after a short grace, as torchrun
    does: they would otherwise wait in a collective for a peer that is gone.
    """

    def __init__(
        self, template: LocalTemplate, directory: Path, run_env: dict[str, str], grace_s: float = 10.0,
        module: str = "interlock.adapters.kfp.rank",
    ):
        self.t = template
        self.module = module
        self.name = f"local ranks of {template.node}"
        self.directory = directory
        self.run_env = run_env
        self.grace_s = grace_s
        self.procs: list[subprocess.Popen[bytes]] = []
        self.failed_at: float | None = None
        self.before_stop: list[int | None] = []  # exit codes as they were before we stopped the rest

    def start(self) -> None:
        port = str(_free_port())
        world = self.t.world_size
        for r in range(world):
            env = {**os.environ, **self.t.env, **self.run_env, "RANK": str(r), "LOCAL_RANK": str(r),
                   "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", self.module, str(self.directory)], env=env,
            ))

    def poll(self) -> tuple[str, JobEnd | None]:
        codes = [p.poll() for p in self.procs]
        if any(c not in (None, 0) for c in codes) and self.failed_at is None:
            self.failed_at = time.monotonic()
        if self.failed_at is not None and time.monotonic() - self.failed_at > self.grace_s:
            self.stop()
            codes = [p.poll() for p in self.procs]
        if all(c is not None for c in codes):
            if all(c == 0 for c in codes):
                return "Succeeded", JobEnd(True)
            # A rank killed by SIGKILL had no chance to record anything: as a lost node. Not
            # one that we stopped ourselves because a peer had failed.
            seen = self.before_stop or codes
            killed = [r for r, c in enumerate(seen) if c == -signal.SIGKILL]
            bad = {r: c for r, c in enumerate(codes) if c != 0}
            return "Failed", JobEnd(False, "RankFailed", f"exit codes {bad}", reclaimed=bool(killed))
        running = sum(c is None for c in codes)
        return f"Running ({running}/{len(codes)} ranks)", None

    def stop(self) -> None:
        if not self.before_stop:
            self.before_stop = [p.poll() for p in self.procs]
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 5
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# -- judging the outcome -----------------------------------------------------------------------
def judge(run: RunContext, node: str, world: int, end: JobEnd, since: float) -> Failure:
    """The step's failure, from what the ranks recorded in this launch and how the job ended.

    When one rank fails the others fail too, in the broken collective: the cause is the most
    severe classified failure (FATAL before PREEMPTED, CONTENTION, TRANSIENT), the earliest
    among equals; an unclassified error (often the peers' echo of the cause) comes last.
    """
    found: list[tuple[tuple[int, float, int], int, Failure]] = []
    for r in range(world):
        state = rank_state(run, r)
        frag = state.read_fragment(node)
        recent = frag is not None and frag.ended >= since
        attempt = next((a for a in reversed(frag.attempts) if a.failure_record()), None) if recent and frag else None
        marker = state.read_marker(node)
        failure = attempt.failure_record() if attempt is not None else (marker.failure if marker else None)
        if failure is None:
            continue
        unclassified = failure.rule == "unclassified"
        order = (9 if unclassified else _SEVERITY.get(failure.kind, 9), attempt.ended if attempt else 0.0, r)
        found.append((order, r, failure))
    if found:
        _, r, worst = min(found, key=lambda item: item[0])
        if worst.kind is not FailureKind.FATAL and end.reclaimed:
            return _reclaimed(end)
        return Failure(worst.kind, f"rank {r} of {world}: {worst.reason}", hint=worst.hint, rule=worst.rule,
                       exc_type=worst.exc_type, message=worst.message, remediation=worst.remediation)
    if end.reclaimed:
        return _reclaimed(end)
    return Failure(
        FailureKind.FATAL, f"the job failed before any rank recorded a failure: {end.reason} {end.message}".strip(),
        hint="look at the job's events and rank logs (kubectl describe / kubectl logs); an image that cannot be "
        "pulled or a rank that cannot import the pipeline fails this way",
        rule="job-failed",
    )


def _reclaimed(end: JobEnd) -> Failure:
    return Failure(
        FailureKind.PREEMPTED, f"a node or rank of the job was reclaimed: {end.reason} {end.message}".strip(),
        hint="retried by KFP and resumed from the last committed checkpoint", rule="job-reclaimed",
    )


@contextmanager
def _cancellable(on_term: Callable[[], None], signums: tuple[int, ...]) -> Iterator[None]:
    """A signal to this process: stop the ranks first, then end the supervision."""
    def handler(signum: int, frame: Any) -> None:
        on_term()
        raise _Cancelled(signal.Signals(signum).name)

    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


class _Cancelled(BaseException):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def supervise(
    ranks: Ranks, *, poll_s: float, report: Callable[[str], None], sleep: Callable[[float], None] = time.sleep,
    on_cluster: bool = True,
) -> JobEnd:
    """Start the ranks, wait for their end, reporting each new state; always stop them.

    What a signal to this process means depends on where it came from. On a cluster SIGTERM
    to the launcher is KFP cancelling the task or the pod being evicted: the job was taken
    away (reclaimed, PREEMPTED). Off a cluster (``local``, kfp-local) SIGTERM or Ctrl-C is the
    user, or their supervisor, stopping interlock itself: a stop, never relaunched.
    """
    last = None
    signums = (signal.SIGTERM,) if on_cluster else (signal.SIGTERM, signal.SIGINT)
    try:
        with _cancellable(ranks.stop, signums):
            ranks.start()
            while True:
                state, end = ranks.poll()
                if state != last:
                    report(state)
                    last = state
                if end is not None:
                    return end
                sleep(poll_s)
    except _Cancelled as got:
        if not on_cluster:
            return JobEnd(False, "Stopped", f"interlock received {got.name}; the ranks were stopped", stopped=got.name)
        return JobEnd(False, "Cancelled", "the launcher received SIGTERM; the job was deleted", reclaimed=True)
    finally:
        ranks.stop()


def stopped_by(run: RunContext, node: str, world: int, end: JobEnd, failure: Failure) -> str | None:
    """The signal that stopped this launch, or None when it was not a stop: interlock itself
    was told to stop (``end.stopped``), or, off a cluster, a rank was stopped by a signal of its
    own (the process group's Ctrl-C) and no rank recorded a failure."""
    if end.stopped:
        return end.stopped
    if run.on_cluster or failure.rule != "job-failed":
        return None
    for r in range(world):
        marker = rank_state(run, r).read_marker(node, StopMarker.STOPPED)
        if marker is not None:
            return marker.failure.message or "a signal"
    return None


def stop_launch(
    run: RunContext, step: StepSpec, node: str, started: float, world: int, signal_name: str,
) -> StepStopped:
    """Record this launch as STOPPED, with the node's STOPPED marker (a backend retry of the
    node stops at once; resuming the run clears it), and the error to raise."""
    record_launch(run, step, node, started, None, world,
                  decision=f"stopped by {signal_name}; not retried: resume the run to continue", stopped=signal_name)
    _clear_rank_markers(run, node, world)
    run.state.write_marker(node, Failure(
        FailureKind.FATAL, f"stopped by {signal_name}", hint="resume the run to continue", rule="stopped",
        message=signal_name,
    ), StopMarker.STOPPED)
    frag = run.state.read_fragment(node)
    return StepStopped(node, signal_name, attempts=len(frag.attempts) if frag else 1, pipeline=run.pipeline,
                       attempt_log=frag.attempts if frag else ())


def refuse_if_marked(run: RunContext, node: str) -> None:
    """A node this run already stopped or gave up on is not launched again (a KFP retry, a
    second call): StepStopped or StepFailed at once, with the first reason."""
    prior = run.state.stop_marker(node)
    if prior is None:
        return
    if prior.kind is StopMarker.STOPPED:
        raise StepStopped(node, prior.failure.message or "a signal", pipeline=run.pipeline)
    refused = prior.refusal()
    raise StepFailed(node, refused.kind, refused.reason, hint=refused.hint, pipeline=run.pipeline, failure=refused)


def rank_state(run: RunContext, rank: int) -> RunState:
    """Where each rank of a KFP distributed node keeps its fragment and markers (rank 0 too):
    the node's own fragment is the launcher's verdict, one attempt per launch."""
    return RunState(Path(run.state_dir) / "ranks" / str(rank), run.run_id)


def execute_rank(run: RunContext, step: StepSpec, node: str, inputs: dict[str, Any]) -> tuple[int, Any]:
    """Run this rank's share of a distributed node through the shim, in the step's process
    group, recording under ``ranks/<rank>``: (rank, the step's result), or (rank, None) when
    the rank failed (said on stderr; the launcher judges the group from the ranks' records)."""
    from interlock.core.run.runtime import execute_step

    from .process_group import process_group, rank

    me = rank()
    run.retry_in_process = frozenset()  # the launcher relaunches the whole group, never one rank
    run.state_dir = rank_state(run, me).state_dir
    try:
        with process_group(step.distributed):
            return me, execute_step(run, step, node, inputs)
    except StepFailed as exc:
        print(f"interlock rank {me}: {exc}", file=sys.stderr, flush=True)
        return me, None


def record_launch(
    run: RunContext, step: StepSpec, node: str, started: float, failure: Failure | None, world: int,
    decision: str | None = None, *, stopped: str | None = None,
) -> None:
    """Append this launch to the node's fragment (what the receipt and every backend's settle read)."""
    state = run.state
    previous = state.read_fragment(node)
    zero = rank_state(run, 0).read_fragment(node)
    attempts = list(previous.attempts) if previous else []
    now = time.time()
    status = Status.STOPPED if stopped else Status.FAILED if failure else Status.SUCCEEDED
    attempts.append(Attempt(len(attempts) + 1, started, now, status, failure.to_dict() if failure else None, decision))
    state.write_fragment(Fragment(
        run_id=run.run_id, node=node, step=step.name, status=status,
        fingerprint=step.fingerprint, image=step.image, started=previous.started if previous else started, ended=now,
        attempts=attempts, snapshots=zero.snapshots if zero else [],
        facts={**(zero.facts if zero else {}), "ranks": world, **({"stopped_by": stopped} if stopped else {})},
        resources=step.resources.to_json(), distributed=step.distributed.to_json() if step.distributed else None,
    ))


def _clear_rank_markers(run: RunContext, node: str, world: int) -> None:
    """A rank's markers are echoes of this launch's verdict, never a reason to refuse the next
    launch: a peer's unclassified echo of the cause (FATAL by default), a spent budget, or the
    STOP a straggler wrote when the supervisor terminated it (SIGTERM off a cluster)."""
    for r in range(world):
        for kind in StopMarker:
            rank_state(run, r).marker_path(node, kind).unlink(missing_ok=True)
