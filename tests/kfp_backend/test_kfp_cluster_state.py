"""A KFP cluster, simulated: each attempt of a task runs the compiled entry point in a fresh
"pod" (its own working directory, the env the IR gives the container, the run id from the pod
label), and the pods share only what a cluster shares: the pipeline root (a moto S3 server)
or the state PVC (a directory). When the shim has given up on a step (FATAL, a spent retry
budget, an output that cannot be written), the next pod must stop in seconds with the first
pod's reason instead of running the step again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from kfp import dsl
from kfp_test_pipelines import cluster

import interlock as il
from interlock.adapters.kfp.compile import compile_pipeline
from interlock.adapters.kfp.entry import run_node
from interlock.adapters.kfp.policies import KfpOptions
from interlock.core.base.errors import StepFailed, StepStopped

REF = "kfp_test_pipelines.cluster:cluster"
SPEC = il.spec(cluster.cluster)


@pytest.fixture
def pipeline_root(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "cluster-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cluster-test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("INTERLOCK_S3_ENDPOINT_URL", moto_endpoint)  # the pods' object store
    bucket = f"kfp-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/pipeline-root"


class Cluster:
    """Runs one node's attempts as KFP would: a fresh pod per attempt, the IR's env, one run id."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opts: KfpOptions, shared: dict[str, str]):
        self.tmp, self.mp = tmp_path, monkeypatch
        ir_path = compile_pipeline(SPEC, tmp_path / "ir" / "cluster.yaml", opts)
        self.ir = list(yaml.safe_load_all(ir_path.read_text()))[0]
        self.shared = shared  # what every pod sees besides the IR's env (a PVC mount)
        self.calls = str(tmp_path / "calls")  # instrumentation: how often user code ran
        self.run_id = f"run-{uuid.uuid4().hex[:8]}"
        self.pods = 0

    def env(self, node: str) -> dict[str, str]:
        container = self.ir["deploymentSpec"]["executors"][f"exec-{node.replace('_', '-')}"]["container"]
        return {e["name"]: e["value"] for e in container.get("env", [])}

    def attempt(self, node: str) -> tuple[StepFailed | None, float]:
        """One pod: fresh working directory, only the compiled env + the pod label's run id."""
        self.pods += 1
        pod = self.tmp / f"pod-{self.pods}"
        pod.mkdir()
        for var in ("INTERLOCK_RUN_ID", "INTERLOCK_STATE_DIR", "INTERLOCK_STATE_ROOT", "INTERLOCK_STATE_STORE",
                    "INTERLOCK_RETRY_IN_PROCESS", "INTERLOCK_BACKEND"):
            self.mp.delenv(var, raising=False)
        for k, v in {**self.env(node), **self.shared, "KFP_RUN_ID": self.run_id}.items():
            self.mp.setenv(k, v)
        self.mp.chdir(pod)
        args: dict[str, Any] = {"calls": self.calls}
        if node == "bad_frame":
            args["dataset"] = dsl.Dataset(uri=str(pod / "outputs" / "dataset"))
        t0 = time.perf_counter()
        try:
            run_node(REF, node, SPEC.step(node).fingerprint, args)
        except StepFailed as exc:
            return exc, time.perf_counter() - t0
        return None, time.perf_counter() - t0

    def pod_process(self, node: str) -> tuple[subprocess.Popen[str], Path]:
        """One pod as a real process (a signal must reach the shim's own handler)."""
        self.pods += 1
        pod = self.tmp / f"pod-{self.pods}"
        pod.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_") or k == "INTERLOCK_S3_ENDPOINT_URL"}
        env.update({**self.env(node), **self.shared, "KFP_RUN_ID": self.run_id})
        code = ("import sys\nfrom interlock.adapters.kfp.entry import run_node\nfrom interlock.core.base.errors import StepFailed\n"
                f"try:\n    run_node({REF!r}, {node!r}, {SPEC.step(node).fingerprint!r}, {{'calls': {self.calls!r}}})\n"
                "except StepFailed as exc:\n    sys.exit(exc.exit_code)\n")
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=pod, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        return proc, pod

    def ran(self, node: str) -> int:
        path = Path(self.calls) / node
        return int(path.read_text()) if path.exists() else 0


@pytest.fixture
def on_s3(pipeline_root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return Cluster(tmp_path, monkeypatch, KfpOptions(pipeline_root=pipeline_root), shared={})


@pytest.fixture
def on_pvc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    pvc = tmp_path / "pvc"  # the volume every pod mounts at /interlock-state
    return Cluster(tmp_path, monkeypatch, KfpOptions(state_pvc="interlock-state"), {"INTERLOCK_STATE_ROOT": str(pvc)})


@pytest.mark.parametrize("where", ["on_s3", "on_pvc"])
@pytest.mark.parametrize(
    ("node", "kind", "reason"),
    [
        ("validate", "FATAL", "column 'amount' has 12 nulls"),
        ("flaky_forever", "TRANSIENT", "giving up after 1 retry"),  # the budget, spent in pod 1
        ("bad_frame", "FATAL", "Conversion failed for column mixed"),  # the output write, inside the shim
    ],
)
def test_a_second_pod_stops_at_once_with_the_first_pods_reason(
    where: str, node: str, kind: str, reason: str, request: pytest.FixtureRequest,
) -> None:
    k8s: Cluster = request.getfixturevalue(where)
    first, _ = k8s.attempt(node)
    assert first is not None and first.kind == kind and first.backend_should_retry is False
    ran = k8s.ran(node)
    second, took = k8s.attempt(node)  # KFP's set_retry: a fresh pod for the same task
    assert second is not None and second.kind == kind
    assert "already failed" in second.reason and f"earlier in run {k8s.run_id}" in second.reason
    assert first.reason in second.reason  # the first pod's reason, not a new failure
    detail = second.failure.message if second.failure else ""
    assert reason in f"{second.reason} {detail}"
    assert took < 5.0 and k8s.ran(node) == ran  # the user's code did not run again


def test_retry_n_spends_its_budget_across_pods_then_stops(on_s3: Cluster) -> None:
    """Retry(3) = set_retry(3): each KFP retry runs the step; the 4th failure ends it for good."""
    for pod in range(1, 5):
        err, _ = on_s3.attempt("ported_bug")
        assert err is not None and on_s3.ran("ported_bug") == pod
        assert err.backend_should_retry is (pod < 4), pod
    extra, took = on_s3.attempt("ported_bug")  # one retry too many (a resubmitted task, a higher set_retry)
    assert extra is not None and "giving up after 3 retries of any failure" in extra.reason
    assert took < 5.0 and on_s3.ran("ported_bug") == 4


def test_runs_do_not_share_stop_markers(on_s3: Cluster) -> None:
    on_s3.attempt("validate")
    on_s3.run_id = "another-run"
    err, _ = on_s3.attempt("validate")
    assert err is not None and "already failed" not in err.reason and on_s3.ran("validate") == 2


def test_a_step_stopped_in_one_pod_is_not_run_again_by_the_next(on_s3: Cluster) -> None:
    """SIGTERM stops a retry=2 step in pod 1; KFP's retry (pod 2, nothing of pod 1's disk)
    stops at once from the marker kept in the object store, without running the step."""
    proc, _ = on_s3.pod_process("stoppable")
    ready = Path(on_s3.calls) / "stoppable.ready"
    end = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, out + err
    assert on_s3.ran("stoppable") == 1
    second, took = on_s3.attempt("stoppable")
    assert isinstance(second, StepStopped), second
    assert took < 5.0 and on_s3.ran("stoppable") == 1  # the user's code did not run again
