"""What a cluster receives for a distributed step: the launcher task in the IR, and the TrainJob /
PyTorchJob it creates, validated against the CRD schemas of kubeflow/trainer and
kubeflow/training-operator (tests/kfp_backend/fixtures/crds, sources in SOURCE.md)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kfp_test_pipelines import dist

import interlock as il
from interlock.adapters.kfp.backend import KfpBackend
from interlock.adapters.kfp.launcher import render_job
from interlock.adapters.kfp.policies import KfpOptions
from interlock.core.base.errors import PolicyError
from interlock.plugins.pytorch.trainjob import JobTemplate, job_name

CRDS = Path(__file__).parent / "fixtures" / "crds"


def crd_schema(filename: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / filename).read_text())
    [version] = [v for v in crd["spec"]["versions"] if v.get("served")]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


TRAINJOB_SCHEMA = crd_schema("trainer.kubeflow.org_trainjobs.yaml")
PYTORCHJOB_SCHEMA = crd_schema("kubeflow.org_pytorchjobs.yaml")


def validate(manifest: dict[str, Any], schema: dict[str, Any]) -> None:
    # OpenAPI v3 structural schemas are JSON Schema for everything a manifest uses;
    # x-kubernetes-* keywords (CEL rules, list types) are the API server's own and are skipped.
    jsonschema.Draft7Validator(schema).validate(manifest)


def compile_ir(tmp_path: Path, pipeline: Any, **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    [path] = KfpBackend().compile(il.spec(pipeline), tmp_path / "p.yaml", KfpOptions.from_options(**options))
    docs = list(yaml.safe_load_all(path.read_text()))
    return docs[0], docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def embedded_template(ir: dict[str, Any], node: str) -> JobTemplate:
    """The job template exactly as compiled into the launcher component's command."""
    source = "\n".join(ir["deploymentSpec"]["executors"][f"exec-{node.replace('_', '-')}"]["container"]["command"])
    tree = ast.parse(source[source.index("def "):])
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "launch_node")
    return JobTemplate.from_json(ast.literal_eval(call.args[4]))


def manifest_for(template: JobTemplate) -> dict[str, Any]:
    return render_job(
        template, name=job_name(template.pipeline, template.node, "run-1"), namespace="team-a",
        handoff="/interlock-state/runs/run-1/state/dist/train_gpu", run_env={"INTERLOCK_RUN_ID": "run-1"},
        owner={"name": "kfp-dist-gpu-abc-123", "uid": "0c7a2f1e-0000-4000-8000-000000000001"},
    )


@pytest.fixture(scope="module")
def gpu_ir(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    return compile_ir(tmp_path_factory.mktemp("ir"), dist.gpu_pipeline, state_pvc="interlock-state", image="reg/team:1",
                      cloud="gke")


def test_trainjob_is_valid_against_the_trainer_crd(gpu_ir: Any) -> None:
    ir, _ = gpu_ir
    t = embedded_template(ir, "train_gpu")
    manifest = manifest_for(t)
    validate(manifest, TRAINJOB_SCHEMA)
    assert manifest["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and manifest["kind"] == "TrainJob"
    spec = manifest["spec"]
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": "torch-distributed"}
    trainer = spec["trainer"]
    assert trainer["image"] == "reg/team:1"
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 4)
    assert trainer["resourcesPerNode"] == {
        "requests": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"},
        "limits": {"memory": "64Gi", "nvidia.com/gpu": "4"},
    }
    assert trainer["command"] == ["torchrun"]
    assert trainer["args"] == ["--nnodes=2", "--nproc-per-node=4", "-m", "interlock.adapters.kfp.rank",
                               "/interlock-state/runs/run-1/state/dist/train_gpu"]
    env = {e["name"]: e for e in trainer["env"]}
    assert env["NCCL_DEBUG"]["value"] == "WARN" and env["INTERLOCK_RUN_ID"]["value"] == "run-1"
    assert env["WANDB_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": "wandb", "key": "api-key"}}
    assert spec["activeDeadlineSeconds"] == 6 * 3600
    [patch] = spec["runtimePatches"]
    [job] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == "node"
    pod = job["template"]["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb", "cloud.google.com/gke-spot": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    assert {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["interlock-state"]["persistentVolumeClaim"] == {"claimName": "interlock-state"}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert pod["spec"]["containers"] == [{"name": "node", "volumeMounts": [
        {"name": "interlock-state", "mountPath": "/interlock-state"}, {"name": "dshm", "mountPath": "/dev/shm"}]}]
    assert pod["metadata"]["labels"]["team"] == "fraud" and pod["metadata"]["labels"]["project"] == "fraud"
    assert manifest["metadata"]["ownerReferences"][0]["kind"] == "Pod"


def test_pytorchjob_is_valid_against_the_training_operator_crd(tmp_path: Path) -> None:
    ir, _ = compile_ir(tmp_path, dist.gpu_pipeline, state_pvc="interlock-state", distributed_job="pytorchjob")
    t = embedded_template(ir, "train_gpu")
    manifest = manifest_for(t)
    validate(manifest, PYTORCHJOB_SCHEMA)
    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "PyTorchJob"
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"]) == (1, 1)
    assert manifest["spec"]["nprocPerNode"] == "4"
    c = specs["Worker"]["template"]["spec"]["containers"][0]
    assert c["name"] == "pytorch"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "4"
    # Training operator v1 gives the master only as MASTER_ADDR/PORT: expanded by Kubernetes.
    assert "--master-addr=$(MASTER_ADDR)" in c["args"] and "--node-rank=$(PET_NODE_RANK)" in c["args"]
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 0


def test_schemas_catch_a_broken_manifest(gpu_ir: Any) -> None:
    """The validation can fail: a TrainJob without its runtime, or with a string node count."""
    ir, _ = gpu_ir
    manifest = manifest_for(embedded_template(ir, "train_gpu"))
    broken = {**manifest, "spec": {k: v for k, v in manifest["spec"].items() if k != "runtimeRef"}}
    with pytest.raises(jsonschema.ValidationError, match="runtimeRef"):
        validate(broken, TRAINJOB_SCHEMA)
    manifest["spec"]["trainer"]["numNodes"] = "2"
    with pytest.raises(jsonschema.ValidationError):
        validate(manifest, TRAINJOB_SCHEMA)


def test_the_launcher_task_is_small_and_owns_the_job(gpu_ir: Any) -> None:
    ir, platform = gpu_ir
    c = ir["deploymentSpec"]["executors"]["exec-train-gpu"]["container"]
    # The GPUs, spot placement and secrets go to the ranks, not the pod that only watches them.
    assert "accelerator" not in c.get("resources", {})
    assert c["resources"]["resourceCpuRequest"] == "250m"
    p = platform["exec-train-gpu"]
    assert "nodeSelector" not in p and "tolerations" not in p and "secretAsEnv" not in p
    fields = {e["name"]: e["fieldPath"] for e in p["fieldPathAsEnv"]}
    assert fields["INTERLOCK_POD_UID"] == "metadata.uid" and fields["INTERLOCK_POD_NAMESPACE"] == "metadata.namespace"
    assert p["pvcMount"][0]["mountPath"] == "/interlock-state"
    assert p["podMetadata"]["labels"] == {"project": "fraud", "team": "fraud"}
    # KFP still retries the launcher for CONTENTION/PREEMPTED (the ranks' kinds, judged by it).
    [launcher] = [c["dag"]["tasks"]["train-gpu"] for c in ir["components"].values() if "train-gpu" in c.get("dag", {}).get("tasks", {})]
    assert launcher["retryPolicy"]["maxRetryCount"] > 0
    # Other steps compile as before.
    assert "run_node(" in "\n".join(ir["deploymentSpec"]["executors"]["exec-make-frame"]["container"]["command"])


def test_distributed_needs_a_state_volume_on_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="train_gpu.*shared state volume") as err:
        compile_ir(tmp_path, dist.gpu_pipeline)
    assert "state_pvc=" in (err.value.hint or "")


def test_elastic_node_range_is_refused_with_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="elastic node range") as err:
        compile_ir(tmp_path, dist.elastic_pipeline, state_pvc="s")
    assert "min_nodes" in (err.value.hint or "")


def test_unknown_job_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="distributed_job='mpijob'"):
        compile_ir(tmp_path, dist.gpu_pipeline, state_pvc="s", distributed_job="mpijob")


def test_job_names_are_dns_labels() -> None:
    name = job_name("Fraud_Retrain", "9_Train.GPU_with_a_very_long_node_name", "run/abc")
    assert len(name) <= 40 and name[0].isalpha()
    assert all(ch.isalnum() or ch == "-" for ch in name) and name == name.lower()
    assert job_name("p", "n", "r", 1) != job_name("p", "n", "r", 2)


def test_capabilities_say_trainjob_default_pytorchjob_option() -> None:
    from interlock.adapters.kfp.backend import KfpLocalBackend

    text = KfpBackend().capabilities().features["distributed"]
    assert not text.startswith("unsupported")
    assert "TrainJob (default" in text and "pytorchjob" in text
    assert KfpLocalBackend().capabilities().features["distributed"].startswith("emulated")


def test_kueue_queue_admits_the_job_as_one_gang(gpu_ir: Any) -> None:
    ir, platform = gpu_ir
    manifest = manifest_for(embedded_template(ir, "train_gpu"))
    validate(manifest, TRAINJOB_SCHEMA)
    kueue = {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "high"}
    # On the TrainJob itself: Kueue suspends it until all 2 x 4-GPU nodes fit, then admits them together.
    assert kueue.items() <= manifest["metadata"]["labels"].items()
    pod = manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert "kueue.x-k8s.io/queue-name" not in pod["template"]["spec"]["template"]["metadata"]["labels"]
    # The launcher pod is not queued (it holds no GPU); a plain GPU step's pod is.
    assert "kueue.x-k8s.io/queue-name" not in platform["exec-train-gpu"]["podMetadata"]["labels"]
    assert platform["exec-evaluate-gpu"]["podMetadata"]["labels"] == {"project": "fraud", "kueue.x-k8s.io/queue-name": "team-a"}


def test_kueue_queue_on_a_pytorchjob(tmp_path: Path) -> None:
    ir, _ = compile_ir(tmp_path, dist.gpu_pipeline, state_pvc="s", distributed_job="pytorchjob")
    manifest = manifest_for(embedded_template(ir, "train_gpu"))
    validate(manifest, PYTORCHJOB_SCHEMA)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    master = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"]["labels"]
    assert "kueue.x-k8s.io/queue-name" not in master
