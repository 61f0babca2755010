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
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interlock.core.base.errors import StepFailed
from interlock.core.base.status import FailureKind
from interlock.core.failure.record import Failure
from interlock.core.model.refs import load_spec
from interlock.core.model.spec import StepSpec
from interlock.core.run.devices import visible_gpus
from interlock.core.run.env import RunEnv
from interlock.core.run.state import RunContext
from interlock.plugins.pytorch.launch import (
    JobEnd,
    LocalRanks,
    Ranks,
    _clear_rank_markers,
    judge,
    record_launch,
    refuse_if_marked,
    stop_launch,
    stopped_by,
    supervise,
)
from interlock.plugins.pytorch.process_group import host_cannot_run
from interlock.plugins.pytorch.trainjob import JobKind, JobTemplate, RankEntry, job_name, render

from .entry import _task_process, run_context
from .handoff import collect_result, handoff_dir, stage_call
from .names import io_names, single_return

log = logging.getLogger("interlock.kfp.launcher")

# Downward-API variables the compiled launcher task gets (policies: launcher_settings).
POD_NAME_ENV = "INTERLOCK_POD_NAME"
POD_UID_ENV = "INTERLOCK_POD_UID"
POD_NAMESPACE_ENV = "INTERLOCK_POD_NAMESPACE"
POLL_ENV = "INTERLOCK_JOB_POLL_S"
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
PATCH_MANAGER = "interlock.dev/kfp-launcher"
RANK_MODULE = "interlock.adapters.kfp.rank"

# Words with which Kubernetes and the job controllers report a lost pod or node.
_RECLAIMED = ("evict", "preempt", "nodelost", "node lost", "disruption", "terminationbykubelet",
              "deletionbypodgc", "shutdown", "spot", "reclaim")


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


def render_job(
    t: JobTemplate, *, name: str, namespace: str, handoff: str, run_env: dict[str, str],
    owner: dict[str, str] | None = None, extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The job this launcher creates: every rank runs ``torchrun -m interlock.adapters.kfp.rank <handoff>``."""
    return render(t, entry=RankEntry(RANK_MODULE, (handoff,), PATCH_MANAGER), name=name, namespace=namespace,
                  run_env=run_env, owner=owner, extra_labels=extra_labels)


# -- the KFP task body -------------------------------------------------------------------------
def _ranks_for(t: JobTemplate, run: RunContext, directory: Path, node: str, launch: int, api_client: Any) -> Ranks:
    run_env = RunEnv(
        pipeline=run.pipeline, run_id=run.run_id, backend=run.backend, state_dir=run.state_dir,
        retry_in_process=frozenset(), checkpoint_root=run.checkpoint_root,
    ).to_env()
    if run.backend == "kfp-local":
        return LocalRanks(t, directory, run_env)
    # A fresh name per launch: a relaunch never adopts the job a previous launch left behind.
    manifest = render_job(
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
    refuse_if_marked(run, node)
    t = JobTemplate.from_json(template)
    problem = host_cannot_run(step.distributed, visible_gpus()) if run.backend == "kfp-local" and step.distributed else None
    if problem is not None:
        failure = Failure(
            FailureKind.FATAL, f"distributed step {step.name!r}: {problem}", rule="host-cannot-run",
            hint="write il.Torchrun(backend='auto', ...) (nccl where CUDA is visible, gloo elsewhere) or "
            "backend='gloo' to run it on this host",
        )
        record_launch(run, step, node, time.time(), failure, t.world_size, decision="not retried")
        run.state.write_marker(node, failure)
        raise StepFailed(node, failure.kind, failure.reason, hint=failure.hint, pipeline=spec.name, failure=failure)
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
            end = supervise(ranks, poll_s=poll_s, sleep=sleep, report=_reporter(node, ranks.name), on_cluster=run.on_cluster)
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
        signal_name = stopped_by(run, node, t.world_size, end, failure)
        if signal_name is not None:  # the user stopped the run (off a cluster): never relaunched
            stopped = stop_launch(run, step, node, since, t.world_size, signal_name)
            if not _task_process():
                raise stopped
            # The task's exit code says "stopped" (143/130), as the shim's does (entry.run_node).
            print(f"interlock: {stopped.headline()}", file=sys.stderr, flush=True)
            raise SystemExit(stopped.exit_code) from None
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


def _reporter(node: str, what: str) -> Callable[[str], None]:
    def report(state: str) -> None:
        print(f"interlock: {node}: {what}: {state}", file=sys.stderr, flush=True)

    return report


def _returned(step: StepSpec, params: list[Any]) -> Any:
    if not params:
        return None
    return params[0] if single_return(step) else tuple(params)
