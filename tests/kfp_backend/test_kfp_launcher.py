"""The launcher of a distributed KFP step, driven through the real Kubernetes client against an
in-process API server whose controller runs the ranks (torchrun, gloo) or fails the job."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fake_kube import FakeKube, run_trainjob_ranks, scripted
from kfp_test_pipelines import dist

import interlock as il
from interlock.adapters.kfp.distributed import job_templates
from interlock.adapters.kfp.handoff import StagedArtifact
from interlock.adapters.kfp.launcher import launch_node
from interlock.adapters.kfp.policies import KfpOptions
from interlock.adapters.kfp.types import read_artifact, write_artifact
from interlock.core.base.errors import StepFailed
from interlock.core.base.status import FailureKind
from interlock.core.run.state import RunState

REF = "kfp_test_pipelines.dist:dist_pipeline"
SPEC = il.spec(dist.dist_pipeline)
STEP = SPEC.step_of("allreduce")


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The launcher pod's environment: the run on the state volume, its own name and namespace."""
    state = tmp_path / "state"
    monkeypatch.setenv("INTERLOCK_STATE_DIR", str(state))
    monkeypatch.setenv("INTERLOCK_RUN_ID", "run-7")
    monkeypatch.setenv("INTERLOCK_BACKEND", "kfp")
    monkeypatch.setenv("INTERLOCK_PIPELINE", SPEC.name)
    monkeypatch.setenv("INTERLOCK_POD_NAMESPACE", "team-a")
    monkeypatch.setenv("INTERLOCK_POD_NAME", "kfp-dist-launcher")
    monkeypatch.setenv("INTERLOCK_POD_UID", "uid-launcher")
    monkeypatch.setenv("INTERLOCK_JOB_POLL_S", "0.1")
    monkeypatch.setenv("INTERLOCK_ON_CLUSTER", "1")  # as the compiled env gives every cluster pod (policies.container_env)
    return state


def kfp_args(tmp_path: Path, n: int = 10) -> dict[str, Any]:
    frame_t = SPEC.step_of("make_frame").outputs[0].type
    df = StagedArtifact(str(tmp_path / "kfp" / "df"), uri="minio://bucket/df")
    write_artifact(pd.DataFrame({"v": [float(i) for i in range(n)]}), frame_t, df)
    return {"df": df, "base": 1.0, "metrics": StagedArtifact(str(tmp_path / "kfp" / "metrics"), name="metrics")}


def template() -> dict[str, Any]:
    return job_templates(SPEC, KfpOptions(state_pvc="interlock-state"))["allreduce"]


def launch(kube: FakeKube, args: dict[str, Any], **kw: Any) -> Any:
    return launch_node(REF, "allreduce", STEP.fingerprint, args, template(), api_client=kube.client(), **kw)


def test_trainjob_runs_the_ranks_and_returns_rank_zeros_outputs(tmp_path: Path, pod: Path) -> None:
    args = kfp_args(tmp_path)
    with FakeKube(run_trainjob_ranks()) as kube:
        returned = launch(kube, args)
        [(key, job)] = kube.jobs.items()
    assert returned == (47.0,)  # (0 + ... + 9) + base on each of the 2 ranks
    metrics_t = STEP.output("metrics").type  # type: ignore[union-attr]
    assert dict(read_artifact(args["metrics"], metrics_t)) == {"total": 47.0, "world": 2.0}
    assert key == ("trainjobs", "team-a", job.obj["metadata"]["name"])
    assert job.obj["metadata"]["ownerReferences"][0]["uid"] == "uid-launcher"
    assert any(p.endswith(f"/trainjobs/{key[2]}") for p in kube.deleted()), "a finished job is deleted"
    # The node's fragment is the launcher's: one attempt per launch; each rank keeps its own.
    frag = RunState(pod, "run-7").read_fragment("allreduce")
    assert frag is not None and frag.status == "succeeded" and len(frag.attempts) == 1
    assert frag.facts["ranks"] == 2
    for r in (0, 1):
        assert RunState(pod / "ranks" / str(r), "run-7").read_fragment("allreduce") is not None


def test_a_rank_failing_fatal_fails_the_step_fatal_once(tmp_path: Path, pod: Path) -> None:
    with FakeKube(run_trainjob_ranks({"DIST_TEST_FAIL_RANK": "1", "DIST_TEST_FAIL_KIND": "oom"})) as kube:
        with pytest.raises(StepFailed) as err:
            launch(kube, kfp_args(tmp_path))
        assert len(kube.jobs) == 1, "a FATAL failure is never relaunched"
        assert kube.deleted()
    assert err.value.kind is FailureKind.FATAL and not err.value.backend_should_retry
    assert "rank 1 of 2" in err.value.reason and "out of memory" in err.value.reason.lower()
    assert "batch" in (err.value.hint or "").lower()
    # The node's marker: a KFP retry of the launcher refuses at once, without creating a job.
    assert RunState(pod, "run-7").read_marker("allreduce") is not None
    with FakeKube(run_trainjob_ranks()) as kube:
        with pytest.raises(StepFailed, match="already failed FATAL"):
            launch(kube, kfp_args(tmp_path))
        assert kube.jobs == {}


def test_a_reclaimed_node_is_preempted_and_left_to_kfp(tmp_path: Path, pod: Path) -> None:
    behavior = scripted((0.0, "Created", "JobSetCreated", ""),
                        (0.3, "Failed", "JobsFailed", "pod node-0-0 was evicted: the node was preempted (spot reclaim)"))
    with FakeKube(behavior) as kube:
        with pytest.raises(StepFailed) as err:
            launch(kube, kfp_args(tmp_path))
        assert kube.deleted()
    assert err.value.kind is FailureKind.PREEMPTED and err.value.backend_should_retry
    assert RunState(pod, "run-7").read_marker("allreduce") is None


def test_a_job_failure_without_a_rank_record_is_fatal_and_says_where_to_look(tmp_path: Path, pod: Path) -> None:
    behavior = scripted((0.1, "Failed", "JobsFailed", "ErrImagePull: reg/team:1 not found"))
    with FakeKube(behavior) as kube, pytest.raises(StepFailed) as err:
        launch(kube, kfp_args(tmp_path))
    assert err.value.kind is FailureKind.FATAL and "ErrImagePull" in err.value.reason
    assert "kubectl" in (err.value.hint or "")


def test_cancelling_the_kfp_task_deletes_the_job(tmp_path: Path, pod: Path) -> None:
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:  # KFP cancels the run: the launcher pod gets SIGTERM while it waits
            os.kill(os.getpid(), signal.SIGTERM)

    with FakeKube(scripted((0.0, "Created", "JobSetCreated", ""))) as kube:
        with pytest.raises(StepFailed) as err:
            launch(kube, kfp_args(tmp_path), sleep=sleep)
        [name] = [k[2] for k in kube.jobs]
        assert kube.deleted() == [f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/{name}"]
    assert err.value.kind is FailureKind.PREEMPTED
    assert signal.getsignal(signal.SIGTERM) is not None  # the previous handler is back


def test_pytorchjob_status_is_read_from_its_own_conditions(tmp_path: Path, pod: Path) -> None:
    from interlock.adapters.kfp.launcher import job_state
    from interlock.plugins.pytorch.trainjob import JobKind

    running = {"status": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}],
                          "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 1}}}}
    state, end = job_state(JobKind.PYTORCHJOB, running)
    assert end is None and state == "Running (Master: 1 active, Worker: 1 active)"
    done = {"status": {"conditions": [{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]}}
    assert job_state(JobKind.PYTORCHJOB, done)[1].succeeded  # type: ignore[union-attr]
    # "Complete" is a TrainJob's word, not a PyTorchJob's.
    assert job_state(JobKind.PYTORCHJOB, {"status": {"conditions": [{"type": "Complete", "status": "True"}]}})[1] is None


def test_the_api_server_refusing_the_job_names_the_crd_and_the_rbac(tmp_path: Path, pod: Path) -> None:
    from interlock.adapters.kfp.launcher import KubernetesJob, render_job
    from interlock.plugins.pytorch.trainjob import JobTemplate

    t = {**template(), "kind": "pytorchjob"}
    manifest = render_job(JobTemplate.from_json(t), name="x", namespace="team-a", handoff="/h", run_env={})
    with FakeKube(scripted(), refuse_create=403) as kube, pytest.raises(StepFailed) as err:
        KubernetesJob(manifest, kube.client()).start()
    assert err.value.kind is FailureKind.FATAL and "403" in err.value.reason
    assert "kubeflow.org/v1 CRD" in (err.value.hint or "") and "create pytorchjobs" in (err.value.hint or "")
