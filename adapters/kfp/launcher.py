"""The KFP task of a distributed step: launch the ranks, wait, judge, clean up.

A distributed step compiles to an ordinary KFP task (same typed signature, same caching and
``set_retry``) whose body calls ``launch_node`` instead of the shim. It

1. stages the call on the run's shared state (``handoff.py``);
2. starts the ranks: a TrainJob/PyTorchJob through the Kubernetes API on a cluster
   (``KubernetesJob``), or local processes on kfp-local (``LocalRanks``, gloo on CPU);
3. waits, logging each change of the job's state;
4. judges the outcome from what the ranks recorded (their receipt fragments and FATAL
   markers): a rank that failed FATAL fails the step FATAL (and leaves the node's marker, so
   a KFP retry exits in seconds); a reclaimed node or rank is PREEMPTED; a TRANSIENT failure
   (a broken collective) relaunches the job at once, up to the step's transient budget;
   CONTENTION and PREEMPTED are left to KFP's ``set_retry``;
5. deletes the job when it ends, fails, or the KFP task is cancelled (SIGTERM). The job
   also names the launcher pod as its owner, so Kubernetes deletes it with the pod.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from interlock.core.errors import StepFailed
from interlock.core.failures import Failure
from interlock.core.loader import load_spec
from interlock.core.runstate import Attempt, Fragment, RunContext, RunEnv, RunState
from interlock.core.spec import StepSpec
from interlock.core.status import FailureKind, Status

from .entry import run_context
from .handoff import collect_result, handoff_dir, stage_call
from .names import io_names, single_return
from .trainjob import JobKind, JobTemplate, job_name, render

log = logging.getLogger("interlock.kfp.launcher")

# Downward-API variables the compiled launcher task gets (policies: launcher_settings).
POD_NAME_ENV = "INTERLOCK_POD_NAME"
POD_UID_ENV = "INTERLOCK_POD_UID"
POD_NAMESPACE_ENV = "INTERLOCK_POD_NAMESPACE"
POLL_ENV = "INTERLOCK_JOB_POLL_S"
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

# Words with which Kubernetes and the job controllers report a lost pod or node.
_RECLAIMED = ("evict", "preempt", "nodelost", "node lost", "disruption", "terminationbykubelet",
              "deletionbypodgc", "shutdown", "spot", "reclaim")
_SEVERITY = {FailureKind.FATAL: 0, FailureKind.PREEMPTED: 1, FailureKind.CONTENTION: 2, FailureKind.TRANSIENT: 3}


@dataclass(frozen=True)
class JobEnd:
    """How the ranks ended, as the controller (or the local supervisor) saw it."""

    succeeded: bool
    reason: str = ""
    message: str = ""
    reclaimed: bool = False  # a node or rank was taken away (eviction, spot reclaim, SIGKILL)


class Ranks(Protocol):
    """A running set of ranks: a Kubernetes job or local processes."""

    name: str

    def start(self) -> None: ...
    def poll(self) -> tuple[str, JobEnd | None]: ...  # (state to report, end when finished)
    def stop(self) -> None: ...


# -- on a cluster ------------------------------------------------------------------------------
def _namespace() -> str:
    if os.environ.get(POD_NAMESPACE_ENV):
        return os.environ[POD_NAMESPACE_ENV]
    try:
        return _SA_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def _owner() -> dict[str, str] | None:
    name, uid = os.environ.get(POD_NAME_ENV), os.environ.get(POD_UID_ENV)
    return {"name": name, "uid": uid} if name and uid else None


def kubernetes_client() -> Any:
    """The in-cluster client of the launcher pod (a kubeconfig outside a cluster)."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


class KubernetesJob:
    """A TrainJob or PyTorchJob created, watched (by polling ``get``) and deleted as a custom object."""

    def __init__(self, manifest: dict[str, Any], api_client: Any = None):
        from kubernetes import client

        self.manifest = manifest
        self.name = manifest["metadata"]["name"]
        self.namespace = manifest["metadata"]["namespace"]
        self.kind = JobKind.TRAINJOB if manifest["kind"] == "TrainJob" else JobKind.PYTORCHJOB
        self.api = client.CustomObjectsApi(api_client or kubernetes_client())
        self.created = False

    def _args(self) -> dict[str, str]:
        return {"group": self.kind.group, "version": self.kind.version, "namespace": self.namespace,
                "plural": self.kind.plural}

    def start(self) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.api.create_namespaced_custom_object(body=self.manifest, **self._args())
        except ApiException as exc:
            kind = FailureKind.CONTENTION if exc.status in (429, 500, 503) else FailureKind.FATAL
            raise StepFailed(
                self.manifest["metadata"]["labels"].get("interlock.dev/node", self.name), kind,
                f"the API server refused {self.manifest['kind']} {self.namespace}/{self.name}: {exc.status} {exc.reason}",
                hint=f"check that the {self.kind.api_version} CRD is installed and that the pipeline's "
                f"service account may create {self.kind.plural} in namespace {self.namespace}",
                backend_should_retry=kind is FailureKind.CONTENTION,
            ) from exc
        self.created = True

    def poll(self) -> tuple[str, JobEnd | None]:
        from kubernetes.client.exceptions import ApiException

        try:
            obj = self.api.get_namespaced_custom_object(name=self.name, **self._args())
        except ApiException as exc:
            if exc.status == 404:  # deleted under us (by hand, or the garbage collector)
                return "deleted", JobEnd(False, "Deleted", f"{self.manifest['kind']} {self.name} was deleted", True)
            raise
        return job_state(self.kind, obj)

    def stop(self) -> None:
        if not self.created:
            return
        from kubernetes.client.exceptions import ApiException

        try:
            self.api.delete_namespaced_custom_object(name=self.name, propagation_policy="Foreground", **self._args())
            log.info("deleted %s %s/%s", self.manifest["kind"], self.namespace, self.name)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("could not delete %s %s/%s: %s", self.manifest["kind"], self.namespace, self.name, exc.reason)
        self.created = False


def job_state(kind: JobKind, obj: dict[str, Any]) -> tuple[str, JobEnd | None]:
    """A TrainJob's or PyTorchJob's status as (what to report, end if finished)."""
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    done_ok = "Complete" if kind is JobKind.TRAINJOB else "Succeeded"
    for c in conditions:
        if c.get("type") == done_ok:
            return done_ok, JobEnd(True, c.get("reason", ""), c.get("message", ""))
        if c.get("type") == "Failed":
            text = f"{c.get('reason', '')} {c.get('message', '')}".lower().replace("_", "")
            return "Failed", JobEnd(False, c.get("reason", ""), c.get("message", ""), any(w in text for w in _RECLAIMED))
    state = conditions[-1].get("type", "Pending") if conditions else "Pending"
    if kind is JobKind.PYTORCHJOB:
        replicas = (obj.get("status") or {}).get("replicaStatuses") or {}
        counts = ", ".join(f"{r}: {s.get('active', 0)} active" for r, s in sorted(replicas.items()))
        return (f"{state} ({counts})" if counts else state), None
    jobs = (obj.get("status") or {}).get("jobsStatus") or []
    counts = ", ".join(f"{j.get('name')}: {j.get('active', 0)} active, {j.get('ready', 0)} ready" for j in jobs)
    return (f"{state} ({counts})" if counts else state), None


# -- on kfp-local ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRanks:
    """The ranks as local processes, the environment torchrun would give them (one node).

    When a rank exits with an error the others are stopped after a short grace, as torchrun
    does: they would otherwise wait in a collective for a peer that is gone.
    """

    def __init__(self, template: JobTemplate, directory: Path, run_env: dict[str, str], grace_s: float = 10.0):
        self.t = template
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
                [sys.executable, "-m", "interlock.adapters.kfp.rank", str(self.directory)], env=env,
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


# -- the KFP task body -------------------------------------------------------------------------
@contextmanager
def _cancellable(on_term: Callable[[], None]) -> Iterator[None]:
    """SIGTERM (KFP cancelled the run, or the launcher pod is being evicted): stop the ranks first."""
    def handler(signum: int, frame: Any) -> None:
        on_term()
        raise _Cancelled()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Cancelled(BaseException):
    pass


def supervise(ranks: Ranks, *, poll_s: float, report: Callable[[str], None], sleep: Callable[[float], None] = time.sleep) -> JobEnd:
    """Start the ranks, wait for their end, reporting each new state; always stop them."""
    last = None
    try:
        with _cancellable(ranks.stop):
            ranks.start()
            while True:
                state, end = ranks.poll()
                if state != last:
                    report(state)
                    last = state
                if end is not None:
                    return end
                sleep(poll_s)
    except _Cancelled:
        return JobEnd(False, "Cancelled", "the launcher received SIGTERM; the job was deleted", reclaimed=True)
    finally:
        ranks.stop()


def _ranks_for(t: JobTemplate, run: RunContext, directory: Path, node: str, launch: int, api_client: Any) -> Ranks:
    run_env = RunEnv(
        pipeline=run.pipeline, run_id=run.run_id, backend=run.backend, state_dir=run.state_dir,
        retry_in_process=frozenset(), checkpoint_root=run.checkpoint_root,
    ).to_env()
    if run.backend == "kfp-local":
        return LocalRanks(t, directory, run_env)
    # A fresh name per launch: a relaunch never adopts the job a previous launch left behind.
    manifest = render(
        t, name=job_name(t.pipeline, node, f"{run.run_id}/{uuid.uuid4().hex}", launch), namespace=_namespace(), handoff=str(directory),
        run_env=run_env, owner=_owner(), extra_labels={"interlock.dev/run-id": run.run_id[:63]},
    )
    return KubernetesJob(manifest, api_client)


def launch_node(
    pipeline_ref: str, node: str, fingerprint: str, args: dict[str, Any], template: dict[str, Any],
    *, api_client: Any = None, sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Run a distributed node's ranks and return its outputs as the KFP component returns them."""
    spec = load_spec(pipeline_ref)
    step = spec.step_of(node)
    if step.fingerprint != fingerprint:
        raise StepFailed(
            node, FailureKind.FATAL,
            f"the code of step {step.name!r} in this image differs from the compiled pipeline",
            hint="rebuild the image from the same commit, then recompile", pipeline=spec.name,
        )
    run = run_context(spec)
    prior = run.state.read_marker(node)
    if prior is not None:
        refused = prior.refusal()
        raise StepFailed(node, refused.kind, refused.reason, hint=refused.hint, pipeline=spec.name, failure=refused)
    t = JobTemplate.from_json(template)
    _, names_out = io_names(step)
    art_outputs = [names_out[p.name] for p in step.outputs if p.type.is_artifact]
    directory = handoff_dir(run.state_dir, node)
    poll_s = float(os.environ.get(POLL_ENV, "10" if run.backend != "kfp-local" else "0.2"))
    earlier = run.state.read_fragment(node)
    # The TRANSIENT budget spans KFP retries of this task, as the shim's does.
    transient_left = step.retry.transient - sum(f.kind is FailureKind.TRANSIENT for f in (earlier.failures() if earlier else []))
    launch = 0
    while True:
        launch += 1
        stage_call(directory, pipeline_ref=pipeline_ref, node=node, fingerprint=fingerprint, args=args, outputs=art_outputs)
        since = time.time() - 1.0
        ranks = _ranks_for(t, run, directory, node, launch, api_client)
        log.info("step %s: launching %s (%d x %d ranks)", node, ranks.name, t.nnodes, t.nproc_per_node)
        try:
            end = supervise(ranks, poll_s=poll_s, sleep=sleep, report=_reporter(node, ranks.name))
        except StepFailed as exc:  # the API server refused the job
            record_launch(run, step, node, since, exc.failure or Failure(exc.kind, exc.reason, hint=exc.hint), t.world_size)
            raise
        if end.succeeded:
            params = collect_result(directory, args, art_outputs)
            if params is None:
                failure = Failure(FailureKind.FATAL, "the job succeeded but rank 0 wrote no result",
                                  hint="the rank command must be `torchrun -m interlock.adapters.kfp.rank`")
                record_launch(run, step, node, since, failure, t.world_size)
                raise StepFailed(node, failure.kind, failure.reason, hint=failure.hint, pipeline=spec.name, failure=failure)
            record_launch(run, step, node, since, None, t.world_size)
            return _returned(step, params)
        failure = judge(run, node, t.world_size, end, since)
        if failure.kind is not FailureKind.FATAL:
            _clear_rank_markers(run, node, t.world_size)
        again = failure.kind is FailureKind.TRANSIENT and transient_left > 0
        record_launch(run, step, node, since, failure, t.world_size,
                      decision="relaunched at once" if again else f"{failure.kind}: left to KFP" if failure.kind is not FailureKind.FATAL else "not retried")
        if again:
            transient_left -= 1
            log.warning("step %s: %s (TRANSIENT): relaunching the job at once", node, failure.reason)
            continue
        if failure.kind is FailureKind.FATAL and run.state.read_marker(node) is None:
            run.state.write_marker(node, failure)
        print(f"interlock: {node}: {failure.kind}: {failure.reason}", file=sys.stderr, flush=True)
        raise StepFailed(
            node, failure.kind, failure.reason, hint=failure.hint, pipeline=spec.name, failure=failure,
            backend_should_retry=failure.kind is not FailureKind.FATAL,
        )


def rank_state(run: RunContext, rank: int) -> RunState:
    """Where each rank of a KFP distributed node keeps its fragment and markers (rank 0 too):
    the node's own fragment is the launcher's verdict, one attempt per launch."""
    return RunState(Path(run.state_dir) / "ranks" / str(rank), run.run_id)


def record_launch(
    run: RunContext, step: StepSpec, node: str, started: float, failure: Failure | None, world: int,
    decision: str | None = None,
) -> None:
    """Append this launch to the node's fragment (what the receipt and every backend's settle read)."""
    state = run.state
    previous = state.read_fragment(node)
    zero = rank_state(run, 0).read_fragment(node)
    attempts = list(previous.attempts) if previous else []
    now = time.time()
    attempts.append(Attempt(
        len(attempts) + 1, started, now, Status.FAILED if failure else Status.SUCCEEDED,
        failure.to_dict() if failure else None, decision,
    ))
    state.write_fragment(Fragment(
        run_id=run.run_id, node=node, step=step.name, status=Status.FAILED if failure else Status.SUCCEEDED,
        fingerprint=step.fingerprint, image=step.image, started=previous.started if previous else started, ended=now,
        attempts=attempts, snapshots=zero.snapshots if zero else [],
        facts={**(zero.facts if zero else {}), "ranks": world},
        resources=step.resources.to_json(), distributed=step.distributed.to_json() if step.distributed else None,
    ))


def _clear_rank_markers(run: RunContext, node: str, world: int) -> None:
    """What the ranks of the failed launch left must not stop the relaunch: a peer's
    unclassified echo of the cause (FATAL by default), a spent in-rank budget, or the stop
    of a straggler the launcher terminated itself."""
    for r in range(world):
        rank_state(run, r).clear_markers()


def _reporter(node: str, what: str) -> Callable[[str], None]:
    def report(state: str) -> None:
        print(f"interlock: {node}: {what}: {state}", file=sys.stderr, flush=True)

    return report


def _returned(step: StepSpec, params: list[Any]) -> Any:
    if not params:
        return None
    return params[0] if single_return(step) else tuple(params)
