"""The fraud reference pipeline's manifest, field by field: what an Argo cluster receives."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

import interlock as il
from interlock.adapters.argo.exit_codes import BY_KIND, GAVE_UP
from interlock.core.base.status import FailureKind
from reference_pipelines.fraud_retrain import fraud_retrain


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The one manifest: a CronWorkflow (fraud_retrain's weekly refresh) around the workflow."""
    out = tmp_path_factory.mktemp("argo")
    [path] = il.compile(fraud_retrain, backend="argo", out=out, image="registry.example/fraud:1", state_pvc="runs",
                        accelerator_label="cloud.google.com/gke-accelerator",
                        spot_selector="cloud.google.com/gke-spot=true", spot_toleration="cloud.google.com/gke-spot=true")
    return yaml.safe_load(path.read_text())


def _workflow(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["workflowSpec"]


def _templates(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in _workflow(doc)["templates"]}


def _task(doc: dict[str, Any], name: str) -> dict[str, Any]:
    main = _templates(doc)[_workflow(doc)["entrypoint"]]
    return next(t for t in main["dag"]["tasks"] if t["name"] == name)


def test_the_weekly_refresh_is_the_cron_workflow_around_it(doc: dict[str, Any]) -> None:
    assert doc["kind"] == "CronWorkflow" and doc["metadata"]["name"] == "fraud-retrain"
    cron = doc["spec"]
    assert (cron["schedules"], cron["timezone"], cron["concurrencyPolicy"]) == (["0 3 * * 1"], "UTC", "Forbid")
    assert "suspend" not in cron or cron["suspend"] is False


def test_train_retries_preemption_natively_and_never_a_fatal_failure(doc: dict[str, Any]) -> None:
    rs = _templates(doc)["train"]["retryStrategy"]
    assert rs["limit"] == 3  # preempted=3; transient=2 stays in the pod (the shim)
    assert rs["retryPolicy"] == "Always"
    assert rs["expression"] == f"lastRetry.status == 'Error' || asInt(lastRetry.exitCode) in [{BY_KIND[FailureKind.PREEMPTED]}]"
    assert str(GAVE_UP) not in rs["expression"]
    assert "backoff" not in rs  # train has no contention backoff
    env = {e["name"]: e.get("value") for e in _templates(doc)["train"]["container"]["env"]}
    assert env["INTERLOCK_RETRY_IN_PROCESS"] == "TRANSIENT"
    assert env["INTERLOCK_RUN_ID"] == "{{workflow.name}}"  # stable across Argo's retries: markers, checkpoints


def test_train_asks_for_its_gpu_on_spot_nodes(doc: dict[str, Any]) -> None:
    t = _templates(doc)["train"]
    res = t["container"]["resources"]
    assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == "1"
    assert res["requests"]["cpu"] == "2" and res["requests"]["memory"] == "4Gi"
    assert t["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h200", "cloud.google.com/gke-spot": "true"}
    assert t["tolerations"] == [{"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true",
                                 "effect": "NoSchedule"}]
    assert t["metadata"]["labels"]["team"] == "fraud"


def test_cached_steps_are_memoized_by_fingerprint_and_input_hashes(doc: dict[str, Any]) -> None:
    ts = _templates(doc)
    spec = il.spec(fraud_retrain)
    for node in ("ingest", "validate", "transform", "train", "evaluate"):
        memo = ts[node]["memoize"]
        assert memo["key"].startswith(spec.step_of(node).fingerprint[:16] + "-{{=sprig.sha256sum(")
        assert memo["cache"]["configMap"]["name"] == "interlock-cache-fraud-retrain"
    assert "inputs.parameters['splits-hash']" in ts["train"]["memoize"]["key"]  # the artifact's content hash
    for node in ("find-champion", "register", "champion-gate"):
        assert "memoize" not in ts[node]


def test_the_gate_is_a_when_on_the_promote_output(doc: dict[str, Any]) -> None:
    register = _task(doc, "register")
    assert register["when"] == "({{tasks.champion-gate.outputs.parameters.promote}} == true)"
    assert "champion-gate" in register["depends"].split(" && ")


def test_the_exit_handler_writes_the_receipt_from_the_state_volume(doc: dict[str, Any]) -> None:
    spec = _workflow(doc)
    exit_t = _templates(doc)[spec["onExit"]]
    args = exit_t["container"]["args"]
    assert args[:3] == ["exit", "--pipeline", "reference_pipelines.fraud_retrain:fraud_retrain"]
    assert args[args.index("--status") + 1] == "{{workflow.status}}"
    assert {"name": "interlock-state", "mountPath": "/interlock-state"} in exit_t["container"]["volumeMounts"]
    assert spec["volumes"] == [{"name": "interlock-state", "persistentVolumeClaim": {"claimName": "runs"}}]
