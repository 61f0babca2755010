"""A distributed step on Argo: the resource template creating a Kubeflow Trainer TrainJob, what
the cluster receives field by field, and its ranks run as real local processes (torchrun, gloo
on CPU) with what the manifest gives them, between the inputs and outputs tasks around it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import argo_pipelines as ap
import jsonschema
import pytest
import yaml
from manifest_runner import ManifestRunner

import interlock as il
from interlock.adapters.argo.manifest import validate
from interlock.core.base.errors import PipelineDefinitionError, PolicyError
from interlock.core.base.status import FailureKind
from interlock.core.failure.record import Failure
from interlock.core.run.state import RunState
from reference_pipelines.digits_ddp import digits_ddp

CRDS = Path(__file__).resolve().parents[1] / "kfp_backend" / "fixtures" / "crds"
SPOT = {"spot_selector": "cloud.google.com/gke-spot=true", "spot_toleration": "cloud.google.com/gke-spot=true",
        "accelerator_label": "cloud.google.com/gke-accelerator"}


def _compile(pipeline: il.Pipeline, out: Path, **options: Any) -> dict[str, Any]:
    [path] = il.compile(pipeline, backend="argo", out=out, image="registry.example/team:1", state_pvc="runs",
                        **options)
    return yaml.safe_load(path.read_text())


def _templates(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in doc["spec"]["templates"]}


def _tasks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    main = _templates(doc)[doc["spec"]["entrypoint"]]
    return {t["name"]: t for t in main["dag"]["tasks"]}


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _compile(ap.ddp_gpu, tmp_path_factory.mktemp("gpu"), **SPOT)


def _job(doc: dict[str, Any], template: str, params: dict[str, str]) -> dict[str, Any]:
    """The TrainJob as the API server receives it: the manifest after Argo's substitution."""
    runner = ManifestRunner(doc, Path("/nonexistent"))
    manifest = _templates(doc)[template]["resource"]["manifest"]
    return json.loads(runner.sub(manifest, {f"inputs.parameters.{k}": v for k, v in params.items()}))


def test_the_workflow_validates_and_the_trainjob_fits_the_trainer_crd(gpu: dict[str, Any]) -> None:
    validate(gpu)  # hera's models, unknown fields refused
    typo = copy.deepcopy(gpu)
    resource = next(t for t in typo["spec"]["templates"] if t["name"] == "train-gpu")["resource"]
    resource["successCondtion"] = resource.pop("successCondition")
    with pytest.raises(PipelineDefinitionError, match=r"resource\.successCondtion"):
        validate(typo)
    crd = yaml.safe_load((CRDS / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    [version] = [v for v in crd["spec"]["versions"] if v.get("served")]
    job = _job(gpu, "train-gpu", {"epochs": "2"})
    jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"]).validate(job)


def test_the_trainjob_holds_the_step_field_by_field(gpu: dict[str, Any]) -> None:
    job = _job(gpu, "train-gpu", {"epochs": "3"})
    assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and job["kind"] == "TrainJob"
    meta = job["metadata"]
    assert meta["generateName"] == "train-gpu-" and "name" not in meta  # each Argo retry: a job of its own
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"  # Kueue admits the job whole
    assert meta["labels"]["interlock.dev/run-id"] == "wf-test"  # {{workflow.name}}, as substituted
    spec = job["spec"]
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                  "name": "torch-distributed"}
    assert spec["activeDeadlineSeconds"] == 7200
    trainer = spec["trainer"]
    assert trainer["image"] == "registry.example/team:1"
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 2)
    assert trainer["command"] == ["torchrun"]
    assert trainer["args"] == ["--nnodes=2", "--nproc-per-node=2", "-m", "interlock.adapters.argo.rank",
                               "argo_pipelines:ddp_gpu", "train_gpu", il.spec(ap.ddp_gpu).step_of("train_gpu").fingerprint]
    res = trainer["resourcesPerNode"]
    assert res["requests"] == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}
    assert res["limits"] == {"memory": "32Gi", "nvidia.com/gpu": "2"}
    env = {e["name"]: e for e in trainer["env"]}
    assert env["INTERLOCK_RUN_ID"]["value"] == "wf-test"  # stable across Argo retries: markers carry over
    assert env["INTERLOCK_STATE_ROOT"]["value"] == "/interlock-state"
    assert env["NCCL_DEBUG"]["value"] == "WARN"
    assert env["WANDB_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": "wandb", "key": "api-key"}}
    assert json.loads(env["INTERLOCK_ARGO_INPUTS"]["value"]) == [["state", "df"], ["json", "epochs"]]
    assert env["INTERLOCK_ARGO_IN_0"]["value"] == "in/df" and env["INTERLOCK_ARGO_IN_1"]["value"] == "3"
    [patch] = spec["runtimePatches"]
    assert patch["manager"] == "interlock.dev/argo"
    [node] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "fraud" and pod["metadata"]["labels"]["project"] == "fraud"
    assert "kueue.x-k8s.io/queue-name" not in pod["metadata"]["labels"]  # on the job only, never per rank
    assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h200",
                                           "cloud.google.com/gke-spot": "true"}
    assert {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"} \
        in pod["spec"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["interlock-state"]["persistentVolumeClaim"] == {"claimName": "runs"}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    [container] = pod["spec"]["containers"]
    assert container["name"] == "node"
    assert {m["name"]: m["mountPath"] for m in container["volumeMounts"]} == {
        "interlock-state": "/interlock-state", "dshm": "/dev/shm"}


def test_the_resource_template_waits_on_the_trainjobs_conditions_and_retries_the_job(gpu: dict[str, Any]) -> None:
    t = _templates(gpu)["train-gpu"]
    r = t["resource"]
    assert r["action"] == "create" and r["setOwnerReference"] is True
    # Kueue created it suspended: Suspended is the first condition, Complete the second.
    assert r["successCondition"] == "status.conditions.1.type == Complete,status.conditions.1.status == True"
    assert r["failureCondition"] == "status.conditions.0.type == Failed,status.conditions.1.type == Failed"
    assert t["inputs"] == {"parameters": [{"name": "epochs"}]}
    assert "{{=toJson(inputs.parameters['epochs'])}}" in r["manifest"]
    rs = t["retryStrategy"]
    assert rs["limit"] == 2 + 3 + 1  # contention attempts + preempted + transient (a broken collective)
    assert rs["backoff"]["duration"] == "60s" and rs["retryPolicy"] == "Always"
    assert "expression" not in rs  # a resource template has no exit code to read
    assert "container" not in t and "nodeSelector" not in t  # the ranks' placement is in the job


def test_without_kueue_the_complete_condition_comes_first(tmp_path: Path) -> None:
    r = _templates(_compile(ap.ddp, tmp_path))["allreduce"]["resource"]
    assert r["successCondition"] == "status.conditions.0.type == Complete,status.conditions.0.status == True"


def test_the_outputs_task_feeds_the_readers(gpu: dict[str, Any]) -> None:
    tasks, templates = _tasks(gpu), _templates(gpu)
    assert tasks["train-gpu-inputs"]["arguments"]["artifacts"] == [
        {"name": "df", "from": "{{tasks.frame.outputs.artifacts.o0}}"}]
    assert templates["train-gpu-inputs"]["inputs"]["artifacts"] == [{"name": "df", "path": "/tmp/interlock/in/df"}]
    assert tasks["train-gpu"]["depends"] == "frame && train-gpu-inputs"
    assert tasks["train-gpu"]["arguments"]["parameters"] == [{"name": "epochs", "value": "{{workflow.parameters.epochs}}"}]
    assert tasks["train-gpu"]["hooks"] == {"exit": {"template": "train-gpu-settle"}}  # a failed job's verdict
    assert templates["train-gpu-settle"]["container"]["args"][:5] == [
        "settle", "--pipeline", "argo_pipelines:ddp_gpu", "--node", "train_gpu"]
    assert tasks["train-gpu-outputs"]["depends"] == "train-gpu"
    assert tasks["evaluate-gpu"]["arguments"]["artifacts"] == [
        {"name": "metrics", "from": "{{tasks.train-gpu-outputs.outputs.artifacts.o0}}"}]
    assert tasks["evaluate-gpu"]["depends"] == "train-gpu-outputs"
    publish = templates["train-gpu-outputs"]
    assert publish["container"]["args"][0] == "publish"
    assert publish["outputs"]["artifacts"] == [{"name": "o0", "path": "/tmp/interlock/out/o0"}]
    assert "resources" not in publish["container"]  # a small pod: the GPUs are the ranks'


def test_a_distributed_step_needs_the_run_volume(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="train_gpu") as err:
        il.compile(ap.ddp_gpu, backend="argo", out=tmp_path, image="registry.example/team:1")
    assert "state_pvc" in (err.value.hint or "")


def test_the_digits_reference_pipeline_compiles_for_argo(tmp_path: Path) -> None:
    doc = _compile(digits_ddp, tmp_path)
    validate(doc)
    tasks = _tasks(doc)
    assert {"train-inputs", "train", "train-outputs"} <= set(tasks)
    job = _job(doc, "train", {"params": json.dumps({"hidden": 64, "epochs": 4})})
    assert (job["spec"]["trainer"]["numNodes"], job["spec"]["trainer"]["numProcPerNode"]) == (1, 2)
    assert {"name": "model", "from": "{{tasks.train-outputs.outputs.artifacts.o0}}"} in \
        tasks["evaluate"]["arguments"]["artifacts"]


def test_the_ranks_run_from_the_manifest_and_the_readers_get_their_outputs(tmp_path: Path) -> None:
    doc = _compile(ap.ddp, tmp_path / "build")
    runner = ManifestRunner(doc, tmp_path / "wf", params={"n": "6"})
    main = runner.run()
    assert main.status == "Succeeded", {k: r.stderr[-2000:] for k, r in runner.ran.items()}
    ran = {k.split("/")[-1]: r for k, r in runner.ran.items()}
    assert [ran[k].status for k in ("frame", "allreduce-inputs", "allreduce", "allreduce-outputs", "describe")] == \
        ["Succeeded"] * 5
    [job] = runner.created
    assert job["spec"]["trainer"]["numProcPerNode"] == 2
    assert ran["allreduce-outputs"].parameters["total"] == "30.0"  # (0+..+5) * scale 2, all-reduced over 2 ranks
    # The str and dataclass parameters crossed Argo's substitution into the manifest intact.
    assert ran["describe"].parameters["o0"] == 'total=30 world=2 tag=it\'s note=say "hi"\nbye'
    state = next((tmp_path / "wf" / "volume").rglob("ranks")).parent
    for rank in (0, 1):  # each rank recorded its share; the node's fragment is the outputs task's
        assert RunState(state / "ranks" / str(rank), "wf-test").read_fragment("allreduce") is not None
    frag = RunState(state, "wf-test").read_fragment("allreduce")
    assert frag is not None and frag.status == "succeeded" and frag.facts["ranks"] == 2
    receipt = json.loads(next((tmp_path / "wf" / "volume").rglob("receipt.json")).read_text())
    assert receipt["status"] == "succeeded"
    assert next(s for s in receipt["steps"] if s["node"] == "allreduce")["status"] == "succeeded"

    # An earlier launch that failed FATAL left the node's marker: a retry's ranks exit at once.
    RunState(state, "wf-test").write_marker("allreduce", Failure(FailureKind.FATAL, "CUDA out of memory", rule="oom"))
    t = _templates(doc)["allreduce"]
    again = runner.run_trainjob(t, {p["name"]: str(runner.params[p["name"]]) for p in t["inputs"]["parameters"]})
    assert again.status == "Failed" and "not run again: CUDA out of memory" in again.stderr
