"""Compiling to KFP v2 IR: assertions on the YAML itself (pipeline spec + platform spec)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import dsl
from kfp_test_pipelines import policies, typed

import interlock as il
from interlock.adapters.kfp.backend import KfpBackend, KfpLocalBackend
from interlock.adapters.kfp.compile import compile_pipeline
from interlock.adapters.kfp.policies import KfpOptions, retry_mapping
from interlock.core.backend import protocol as backends
from interlock.core.backend.protocol import Runner, get_backend, register_backend
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError, PolicyError
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.spec import Binding
from interlock.core.run.env import RunEnv


def load_ir(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all(path.read_text()))
    assert len(docs) == 2, "pipeline spec + kfp-kubernetes platform spec"
    return docs[0], docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


ROOT = KfpOptions(pipeline_root="s3://ml-pipelines/root")  # a durable place for run state


@pytest.fixture(scope="module")
def policies_ir(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any], Path]:
    gke = dataclasses.replace(ROOT, cloud="gke")  # GKE's node labels for the GPU model and spot
    path = compile_pipeline(il.spec(policies.policies), tmp_path_factory.mktemp("ir") / "policies.yaml", gke)
    return (*load_ir(path), path)


def task(ir: dict[str, Any], name: str) -> dict[str, Any]:
    for comp in [ir["root"], *ir["components"].values()]:
        tasks = comp.get("dag", {}).get("tasks", {})
        if name in tasks:
            return tasks[name]
    raise KeyError(name)


def container(ir: dict[str, Any], node: str) -> dict[str, Any]:
    return ir["deploymentSpec"]["executors"][f"exec-{node}"]["container"]


def test_ir_loads_back_with_kfp_and_imports_user_code_by_name(tmp_path: Path) -> None:
    from kfp import components

    spec = il.spec(typed.typed)
    path = compile_pipeline(spec, tmp_path / "typed.yaml")
    loaded = components.load_component_from_file(str(path))
    assert loaded.name == "kfp-typed"
    assert sorted(loaded.component_spec.inputs) == ["margin", "n", "params"]
    ir, _ = load_ir(path)
    assert set(ir["deploymentSpec"]["executors"]) == {f"exec-{n.name.replace('_', '-')}" for n in spec.nodes}
    source = "\n".join(container(ir, "train")["command"])
    step = spec.step("train")
    assert f"run_node('kfp_test_pipelines.typed:typed', 'train', '{step.fingerprint}'" in source
    # The user's function body is never inlined: only the shim call travels in the command.
    assert "weights.json" not in path.read_text()
    assert "pip install" not in source  # the image holds interlock and the team's code


def test_types_become_kfp_parameters_and_artifacts(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(typed.typed), tmp_path / "typed.yaml"))
    comps = ir["components"]
    frame_out = comps["comp-make-frame"]["outputDefinitions"]["artifacts"]["dataset"]["artifactType"]
    assert frame_out["schemaTitle"] == "system.Dataset"
    train = comps["comp-train"]
    assert train["inputDefinitions"]["artifacts"]["df"]["artifactType"]["schemaTitle"] == "system.Dataset"
    assert train["inputDefinitions"]["parameters"]["params"]["parameterType"] == "STRUCT"  # dataclass as JSON
    arts = train["outputDefinitions"]["artifacts"]
    assert arts["model"]["artifactType"]["schemaTitle"] == "system.Model"
    assert arts["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"
    params = train["outputDefinitions"]["parameters"]
    assert params["rows"]["parameterType"] == "NUMBER_INTEGER"
    # dict[str, int]: JSON text, so ints and key order arrive as the step returned them (a STRUCT
    # sorted the keys on kfp-local and made every number a double on a cluster).
    assert params["counts"]["parameterType"] == "STRING"
    evaluate = comps["comp-evaluate"]
    assert evaluate["inputDefinitions"]["parameters"]["tags"]["parameterType"] == "LIST"
    # A single JSON output is KFP's "Output".
    assert evaluate["outputDefinitions"]["parameters"]["Output"]["parameterType"] == "STRUCT"
    gate = comps["comp-champion-gate"]
    # champion (il.Metrics | None = None) is left unbound: not declared, the shim uses the default.
    assert "champion" not in gate["inputDefinitions"].get("artifacts", {})
    assert gate["outputDefinitions"]["parameters"]["promote"]["parameterType"] == "BOOLEAN"
    root = ir["root"]["inputDefinitions"]["parameters"]
    assert root["params"]["defaultValue"] == {"epochs": 3, "lr": 0.5, "tags": ["base"]}
    assert root["n"]["parameterType"] == "NUMBER_INTEGER"


def test_retry_policy_carries_contention_backoff(policies_ir: Any) -> None:
    ir, _, _ = policies_ir
    # prepare: Backoff(attempts=3, first=5m, factor 2, max 30m) + preempted=2; transient stays in the shim.
    assert task(ir, "prepare")["retryPolicy"] == {
        "maxRetryCount": 5, "backoffDuration": "300s", "backoffFactor": 2.0, "backoffMaxDuration": "1800s",
    }
    assert task(ir, "train")["retryPolicy"]["maxRetryCount"] == 4 + 5
    assert "retryPolicy" not in task(ir, "gate")  # Retry(contention=None, preempted=0)
    env = {e["name"]: e["value"] for e in container(ir, "train")["env"]}
    assert env["INTERLOCK_RETRY_IN_PROCESS"] == "FATAL,TRANSIENT"


def test_retry_mapping_without_contention() -> None:
    m = retry_mapping(il.Retry(transient=2, contention=None, preempted=3))
    assert m is not None and (m.num_retries, m.backoff_duration) == (3, "0s")
    assert retry_mapping(il.Retry(transient=2, contention=None, preempted=0)) is None


def test_caching_follows_the_step_and_the_code(policies_ir: Any, tmp_path: Path) -> None:
    ir, _, _ = policies_ir
    assert task(ir, "prepare")["cachingOptions"] == {"enableCache": True}
    assert task(ir, "train")["cachingOptions"] == {}  # no il.Cache: KFP's default caching is off
    spec = il.spec(policies.policies)
    # A code change changes the fingerprint, which sits in the command KFP's cache key covers.
    changed = dataclasses.replace(
        spec, steps=tuple(dataclasses.replace(s, fingerprint="0" * 64) if s.name == "prepare" else s for s in spec.steps)
    )
    ir2, _ = load_ir(compile_pipeline(changed, tmp_path / "changed.yaml", ROOT))
    assert container(ir2, "prepare")["command"] != container(ir, "prepare")["command"]
    assert container(ir2, "train")["command"] == container(ir, "train")["command"]
    off, _ = load_ir(compile_pipeline(spec, tmp_path / "off.yaml", dataclasses.replace(ROOT, caching=False)))
    assert task(off, "prepare")["cachingOptions"] == {}


def test_resources_and_accelerator(policies_ir: Any) -> None:
    ir, platform, _ = policies_ir
    res = container(ir, "train")["resources"]
    assert res["resourceCpuRequest"] == "8"
    assert res["resourceMemoryRequest"] == "32Gi"
    assert res["resourceMemoryLimit"] == "32Gi"  # the limit defaults to the request
    assert res["accelerator"]["resourceType"] == "nvidia.com/gpu"
    assert res["accelerator"]["resourceCount"] == "2"
    prep = container(ir, "prepare")["resources"]
    assert (prep["resourceCpuLimit"], prep["resourceMemoryLimit"]) == ("4", "8Gi")
    selector = platform["exec-train"]["nodeSelector"]["labels"]
    assert selector["cloud.google.com/gke-accelerator"] == "nvidia-h200-141gb"  # GKE names its H200 by memory
    assert selector["pool"] == "gpu"
    assert {"name": "LOG_LEVEL", "value": "info"} in container(ir, "prepare")["env"]


def test_platform_spec_tolerations_labels_secrets_timeout(policies_ir: Any) -> None:
    _, platform, path = policies_ir
    train = platform["exec-train"]
    tolerations = train["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    # interruptible: the spot toleration and node selector
    assert {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in tolerations
    assert train["nodeSelector"]["labels"]["cloud.google.com/gke-spot"] == "true"
    assert train["podMetadata"]["labels"] == {"team": "fraud", "cost-center": "ml-42", "project": "fraud"}
    assert train["podMetadata"]["annotations"] == {"example.com/owner": "fraud-ml"}
    assert platform["exec-prepare"]["podMetadata"]["labels"] == {"project": "fraud"}  # pipeline labels on every pod
    secrets = {s["secretName"]: s["keyToEnv"] for s in train["secretAsEnv"]}
    assert secrets == {
        "wandb": [{"secretKey": "api-key", "envVar": "WANDB_API_KEY"}],
        "s3-creds": [{"secretKey": "secret", "envVar": "S3_CREDS_SECRET"}],
    }
    assert "secretAsEnv" not in platform["exec-prepare"]
    assert train["activeDeadlineSeconds"] == "21600"
    assert train["emptyDirMounts"] == [{"medium": "Memory", "mountPath": "/dev/shm", "sizeLimit": "8Gi", "volumeName": "dshm"}]
    assert {"name": "KFP_RUN_ID", "fieldPath": "metadata.labels['pipeline/runid']"} in train["fieldPathAsEnv"]
    assert "stringData" not in path.read_text() and "value: api-key" not in path.read_text()


def test_pvc_mounts_and_state_volume(tmp_path: Path) -> None:
    opts = KfpOptions(pvc_mounts=(("datasets", "/data"),), state_pvc="interlock-state")
    _, platform = load_ir(compile_pipeline(il.spec(policies.policies), tmp_path / "p.yaml", opts))
    mounts = {m["mountPath"]: m["constant"] for m in platform["exec-prepare"]["pvcMount"]}
    assert mounts == {"/data": "datasets", "/interlock-state": "interlock-state"}


def test_gate_becomes_dsl_if(policies_ir: Any) -> None:
    ir, _, _ = policies_ir
    cond = ir["root"]["dag"]["tasks"]["condition-1"]
    assert cond["triggerPolicy"]["condition"] == "inputs.parameter_values['pipelinechannel--gate-Output'] == true"
    assert "publish" in ir["components"]["comp-condition-1"]["dag"]["tasks"]
    assert "publish" not in ir["root"]["dag"]["tasks"]


def test_gate_on_a_dataclass_field_goes_through_a_selector(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(typed.field_gate), tmp_path / "fg.yaml"))
    sel = ir["root"]["dag"]["tasks"]["select-bool"]
    assert sel["inputs"]["parameters"]["path"]["runtimeValue"]["constant"] == ["approved"]
    cond = ir["root"]["dag"]["tasks"]["condition-1"]["triggerPolicy"]["condition"]
    assert cond == "inputs.parameter_values['pipelinechannel--select-bool-Output'] == true"
    # The input bound to report.rows receives the whole struct; the shim follows the field.
    ship = ir["components"]["comp-ship"]["inputDefinitions"]["parameters"]["rows"]
    assert ship["parameterType"] == "STRUCT"


def test_kfp_type_check_is_reported_as_a_definition_error(tmp_path: Path) -> None:
    # Bypass interlock's own edge check to prove kfp's InconsistentTypeException is wired
    # through: a str output into an int input.
    spec = il.spec(policies.policies)
    nodes = tuple(
        dataclasses.replace(n, inputs=(("score", Binding.of_output("prepare", "o0")),)) if n.name == "publish" else n
        for n in spec.nodes
    )
    broken = PipelineSpec(**{**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}, "nodes": nodes})
    with pytest.raises(PipelineDefinitionError) as info:
        compile_pipeline(broken, tmp_path / "broken.yaml", ROOT)
    assert "publish" in str(info.value) and "kfp refused" in str(info.value)
    assert isinstance(info.value.__cause__, Exception)


def test_pipeline_without_importable_ref_is_refused(tmp_path: Path) -> None:
    spec = dataclasses.replace(il.spec(policies.policies), ref="__main__:policies")
    with pytest.raises(PipelineDefinitionError, match="importable"):
        compile_pipeline(spec, tmp_path / "x.yaml", ROOT)


def test_backend_compile_emits_image_files(tmp_path: Path) -> None:
    files = KfpBackend().compile(
        il.spec(typed.typed), tmp_path / "build" / "typed.yaml", KfpOptions.from_options(
            emit_image=True, image="registry.example/fraud:1", requirements=["scikit-learn==1.5.2"], context=str(tmp_path),
        ),
    )
    yaml_path, dockerfile, reqs, ignore, *_ = files
    assert ignore == dockerfile.with_name("Dockerfile.dockerignore")
    assert dockerfile == tmp_path / "build" / "kfp-typed-image" / "Dockerfile"
    text = dockerfile.read_text()
    assert "COPY build/kfp-typed-image/requirements.txt /tmp/requirements.txt" in text
    assert "ENV PYTHONPATH=" in text and text.startswith("# Generated")
    lines = reqs.read_text().split()
    assert any(line.startswith("kfp==2.17") for line in lines)
    assert any(line.startswith("pandas==") for line in lines)  # a DataFrame crosses a step boundary
    assert "scikit-learn==1.5.2" in lines
    ir, _ = load_ir(yaml_path)
    assert container(ir, "train")["image"] == "registry.example/fraud:1"


def test_the_run_id_variable_is_declared_by_the_kfp_backends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.adapters.kfp.entry import run_context_for

    declared = {KfpBackend().capabilities().run_id_env, KfpLocalBackend().capabilities().run_id_env}
    assert declared == {"KFP_RUN_ID"}
    ir, platform = load_ir(compile_pipeline(il.spec(policies.policies), tmp_path / "p.yaml", ROOT))
    assert {"name": "KFP_RUN_ID", "fieldPath": "metadata.labels['pipeline/runid']"} in platform["exec-train"]["fieldPathAsEnv"]
    monkeypatch.delenv("INTERLOCK_RUN_ID", raising=False)
    monkeypatch.setenv("KFP_RUN_ID", "from-the-label")
    assert run_context_for("p").run_id == "from-the-label"  # the task entry reads the declared variable
    assert RunEnv.read().run_id is None  # core alone knows no orchestrator's variable


def test_unknown_compile_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(il.PolicyError, match=r"backend 'kfp' has no compile option\(s\) \['gpu_vendor'\]; its options are: image, "):
        il.compile(typed.typed, backend="kfp", out=tmp_path / "x.yaml", gpu_vendor="amd")
    assert not (tmp_path / "x.yaml").exists()


def test_capabilities_list_what_kfp_cannot_express(monkeypatch: pytest.MonkeyPatch) -> None:
    caps = KfpBackend().capabilities()
    assert not caps.supports("run") and caps.supports("gates") and caps.supports("secrets")
    assert caps.features["retry.fatal_stop"].startswith("emulated")
    assert any("it leaves a stop marker so KFP's retry exits in seconds" in line for line in caps.lossy)
    assert any("ignore_inputs" in line for line in caps.lossy)
    assert KfpLocalBackend().capabilities().supports("run")
    # Compile-only: no run at all, and il.run refuses it before anything runs.
    assert not isinstance(KfpBackend(), Runner) and isinstance(KfpLocalBackend(), Runner)
    monkeypatch.setitem(backends._registered, "kfp-compile-only", KfpBackend)
    with pytest.raises(CapabilityError, match="compiles only") as info:
        il.run(typed.typed, backend="kfp-compile-only")
    assert "kfp-local" in (info.value.hint or "")


def test_il_compile_through_the_backend_protocol(tmp_path: Path) -> None:
    try:
        get_backend("kfp")
    except il.InterlockError:
        register_backend("kfp", KfpBackend)  # until the entry point is installed
    [path] = il.compile(typed.typed, backend="kfp", out=tmp_path)
    assert path == tmp_path / "kfp-typed.yaml"
    ir, _ = load_ir(path)
    assert ir["pipelineInfo"]["name"] == "kfp-typed"


def test_node_names_become_unique_kfp_task_names(tmp_path: Path) -> None:
    spec = il.spec(policies.policies)
    twin = dataclasses.replace(spec.node("publish"), name="publish-2")
    twice = dataclasses.replace(spec, nodes=(*spec.nodes, Node(twin.name, twin.step, twin.inputs, twin.gate)))
    ir, _ = load_ir(compile_pipeline(twice, tmp_path / "twice.yaml", ROOT))
    inner = ir["components"]["comp-condition-1"]["dag"]["tasks"]
    assert {"publish", "publish-2"} <= set(inner)
    assert inner["publish-2"]["taskInfo"]["name"] == "publish-2"


def test_cli_style_string_options(tmp_path: Path) -> None:
    files = KfpBackend().compile(il.spec(policies.policies), tmp_path / "p.yaml", KfpOptions.from_options(
        caching="false", emit_image="true",
        pvc_mounts="datasets:/data", requirements="xgboost==2.1.1,scikit-learn==1.5.2", pipeline_root="s3://ml/root",
    ))
    ir, platform = load_ir(files[0])
    assert task(ir, "prepare")["cachingOptions"] == {}
    assert platform["exec-prepare"]["pvcMount"][0]["mountPath"] == "/data"
    assert "xgboost==2.1.1" in files[2].read_text().split()
    with pytest.raises(il.PolicyError, match="not a boolean"):
        KfpOptions.from_options(caching="maybe")


def test_state_volume_env(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(policies.policies), tmp_path / "p.yaml", KfpOptions(state_pvc="st")))
    env = {e["name"]: e["value"] for e in container(ir, "train")["env"]}
    assert env["INTERLOCK_STATE_ROOT"] == "/interlock-state" and "INTERLOCK_STATE_DIR" not in env


def test_ir_is_what_kfp_client_submits(tmp_path: Path) -> None:
    # kfp.Client().create_run_from_pipeline_package reads the file with this function: a strict
    # protobuf parse of the pipeline spec and the platform spec, which it then sends to the API.
    from kfp.client.client import _extract_pipeline_yaml

    for pipe in (typed.typed, typed.field_gate, policies.policies, typed.optional, typed.nested):
        doc = _extract_pipeline_yaml(str(compile_pipeline(il.spec(pipe), tmp_path / f"{pipe.name}.yaml", ROOT)))
        assert doc.pipeline_spec.pipeline_info.name == pipe.name
        assert "kubernetes" in doc.platform_spec.platforms
    doc = _extract_pipeline_yaml(str(compile_pipeline(il.spec(policies.policies), tmp_path / "pvc.yaml", KfpOptions(state_pvc="st"))))
    executors = doc.platform_spec.platforms["kubernetes"].deployment_spec.executors
    assert "exec-interlock-receipt" in executors


def test_pipeline_outputs_are_declared(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(typed.typed), tmp_path / "typed.yaml"))
    defs = ir["root"]["outputDefinitions"]
    assert defs["artifacts"]["o3"]["artifactType"]["schemaTitle"] == "system.Model"
    assert {k: v["parameterType"] for k, v in defs["parameters"].items()} == {
        "o0": "STRUCT", "o1": "NUMBER_INTEGER", "o2": "BOOLEAN",
    }
    outs = ir["root"]["dag"]["outputs"]
    assert outs["parameters"]["o2"]["valueFromParameter"] == {"outputParameterKey": "promote", "producerSubtask": "champion-gate"}
    assert outs["artifacts"]["o3"]["artifactSelectors"] == [{"outputArtifactKey": "model", "producerSubtask": "train"}]


def test_int_into_float_is_declared_int_for_kfp(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(typed.widen), tmp_path / "w.yaml"))
    comps = ir["components"]
    assert comps["comp-half"]["inputDefinitions"]["parameters"]["x"]["parameterType"] == "NUMBER_INTEGER"
    assert comps["comp-half-param"]["inputDefinitions"]["parameters"]["x"]["parameterType"] == "NUMBER_INTEGER"
    assert comps["comp-half-const"]["inputDefinitions"]["parameters"]["x"]["parameterType"] == "NUMBER_DOUBLE"
    assert task(ir, "half-const")["inputs"]["parameters"]["x"]["runtimeValue"]["constant"] == 5.0


def test_optional_values_travel_as_json_text(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(typed.optional), tmp_path / "o.yaml"))
    root = ir["root"]["inputDefinitions"]["parameters"]
    assert root["x"] == {"defaultValue": "null", "isOptional": True, "parameterType": "STRING"}
    maybe = ir["components"]["comp-maybe"]
    assert maybe["inputDefinitions"]["parameters"]["x"]["parameterType"] == "STRING"  # Optional producer
    assert maybe["inputDefinitions"]["parameters"]["label"]["parameterType"] == "STRING"
    assert maybe["outputDefinitions"]["parameters"]["Output"]["parameterType"] == "STRING"  # str | None
    bare = ir["components"]["comp-bare"]
    assert "inputDefinitions" not in bare  # unbound None defaults are not declared
    # A plain int into an Optional[int] port stays an int on the wire.
    assert ir["components"]["comp-plain"]["inputDefinitions"]["parameters"]["x"]["parameterType"] == "NUMBER_INTEGER"


def test_interlock_compile_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from interlock.core.cli.main import main

    try:
        get_backend("kfp")
    except il.InterlockError:
        register_backend("kfp", KfpBackend)  # until the entry point is installed
    out = tmp_path / "build" / "typed.yaml"
    code = main([
        "compile", "kfp_test_pipelines.typed:typed", "--backend", "kfp", "--out", str(out),
        "--image", "registry.example/fraud:1", "--option", "emit_image=true", "--option", "caching=false",
    ])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert printed[0] == str(out) and printed[1].endswith("kfp-typed-image/Dockerfile")
    ir, _ = load_ir(out)
    assert container(ir, "train")["image"] == "registry.example/fraud:1"
    assert task(ir, "train")["cachingOptions"] == {}


def test_nested_gates_nest_dsl_if(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(typed.nested), tmp_path / "n.yaml"))
    root = ir["root"]["dag"]["tasks"]
    assert {"positive", "ship-always", "condition-1"} == set(root)
    outer = ir["components"]["comp-condition-1"]["dag"]["tasks"]
    assert {"ship-positive", "big", "condition-2"} == set(outer)
    assert outer["condition-2"]["triggerPolicy"]["condition"] == "inputs.parameter_values['pipelinechannel--big-Output'] == true"
    assert set(ir["components"]["comp-condition-2"]["dag"]["tasks"]) == {"ship-big"}


def test_receipt_exit_handler_with_a_state_volume(tmp_path: Path) -> None:
    ir, platform = load_ir(compile_pipeline(il.spec(typed.typed), tmp_path / "t.yaml", KfpOptions(state_pvc="st")))
    root = ir["root"]["dag"]["tasks"]
    receipt_task = root["interlock-receipt"]
    assert receipt_task["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"  # runs after a failure too
    assert receipt_task["inputs"]["parameters"]["status"] == {"taskFinalStatus": {"producerTask": "exit-handler-1"}}
    assert receipt_task["inputs"]["parameters"]["params"] == {"componentInputParameter": "params"}
    assert receipt_task["cachingOptions"] == {}
    assert "train" in ir["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    assert platform["exec-interlock-receipt"]["pvcMount"][0]["mountPath"] == "/interlock-state"
    assert "outputDefinitions" not in ir["root"]  # KFP refuses outputs from inside an ExitHandler
    plain, _ = load_ir(compile_pipeline(il.spec(typed.typed), tmp_path / "plain.yaml"))
    assert "interlock-receipt" not in plain["root"]["dag"]["tasks"]  # no shared state: no receipt task


# -- retry policies say what the user wrote; run state has a durable place --------------------
def test_compiled_retries_are_what_the_steps_declare(tmp_path: Path) -> None:
    from core_pipelines.ported import ported_pipeline

    ir, _ = load_ir(compile_pipeline(il.spec(ported_pipeline), tmp_path / "ported.yaml", ROOT))
    # No retry policy: no retryPolicy at all, as a bare KFP component (not 14 retries with 5-minute waits).
    assert "retryPolicy" not in task(ir, "plain")
    assert "retryPolicy" not in task(ir, "in-pod-only")  # TRANSIENT is retried by the shim, in the pod
    # retry=3 and il.Retry(3): exactly what a plain KFP task with .set_retry(3) compiles to.
    native = _native_set_retry_3(tmp_path)
    assert native == {"maxRetryCount": 3, "backoffDuration": "0s", "backoffFactor": 2.0, "backoffMaxDuration": "3600s"}
    assert task(ir, "ported")["retryPolicy"] == native
    assert task(ir, "ported-cls")["retryPolicy"] == native
    assert task(ir, "taxonomy")["retryPolicy"] == {
        "maxRetryCount": 2 + 1, "backoffDuration": "60s", "backoffFactor": 2.0, "backoffMaxDuration": "3600s",
    }
    assert ir["defaultPipelineRoot"] == "s3://ml-pipelines/root"
    env = {e["name"]: e["value"] for e in container(ir, "ported")["env"]}
    assert env["INTERLOCK_STATE_STORE"] == "s3://ml-pipelines/root"


def test_a_champion_gate_and_its_register_step_are_not_retried(tmp_path: Path) -> None:
    ir, _ = load_ir(compile_pipeline(il.spec(policies.policies), tmp_path / "p.yaml", ROOT))
    assert "retryPolicy" not in task(ir, "publish")  # declares nothing
    assert "retryPolicy" not in task(ir, "gate")


def test_kfp_retries_without_a_durable_place_for_run_state_are_refused(tmp_path: Path) -> None:
    from core_pipelines.ported import plain_pipeline, ported_pipeline

    with pytest.raises(PipelineDefinitionError) as info:
        compile_pipeline(il.spec(ported_pipeline), tmp_path / "x.yaml")
    err = info.value
    assert err.step == "ported" and "3 KFP retries" in str(err) and "vanish with it" in str(err)
    assert "pipeline_root=s3://" in (err.hint or "") and "state_pvc=" in (err.hint or "")
    assert not (tmp_path / "x.yaml").exists()
    # Nothing retried by KFP: nothing to keep.
    compile_pipeline(il.spec(plain_pipeline), tmp_path / "plain.yaml")
    # A state volume or a store is a durable place; the PVC holds the state itself.
    ir, _ = load_ir(compile_pipeline(il.spec(ported_pipeline), tmp_path / "pvc.yaml", KfpOptions(state_pvc="st")))
    env = {e["name"]: e["value"] for e in container(ir, "ported")["env"]}
    assert "INTERLOCK_STATE_STORE" not in env and env["INTERLOCK_STATE_ROOT"] == "/interlock-state"
    ir, _ = load_ir(compile_pipeline(il.spec(ported_pipeline), tmp_path / "st.yaml", KfpOptions(state_store="s3://b/state")))
    env = {e["name"]: e["value"] for e in container(ir, "ported")["env"]}
    assert env["INTERLOCK_STATE_STORE"] == "s3://b/state"
    # The CLI spelling.
    files = KfpBackend().compile(il.spec(ported_pipeline), tmp_path / "cli.yaml", KfpOptions.from_options(pipeline_root="s3://b/root"))
    assert load_ir(files[0])[0]["defaultPipelineRoot"] == "s3://b/root"


def _native_set_retry_3(tmp_path: Path) -> dict[str, Any]:
    """The retryPolicy kfp itself emits for a component with ``.set_retry(3)``."""
    from kfp import compiler, components

    # A component from its YAML spec: this module's string annotations are invisible to kfp.
    double = components.load_component_from_text(
        "name: double\nimplementation:\n  container:\n    image: alpine\n    command: [echo, hi]\n"
    )

    @dsl.pipeline(name="native")
    def native():  # no annotations: kfp reads them, and this module makes them strings
        double().set_retry(3)

    path = tmp_path / "native.yaml"
    compiler.Compiler().compile(native, str(path))
    ir = yaml.safe_load(path.read_text())  # no platform spec: nothing Kubernetes-specific
    return task(ir, "double")["retryPolicy"]


@pytest.mark.parametrize("cloud, spot_selector, spot_toleration, accelerator", [
    (None, {}, None, None),
    ("gke", {"cloud.google.com/gke-spot": "true"}, "cloud.google.com/gke-spot", "cloud.google.com/gke-accelerator"),
    ("eks", {"eks.amazonaws.com/capacityType": "SPOT"}, None, None),
    ("aks", {"kubernetes.azure.com/scalesetpriority": "spot"}, "kubernetes.azure.com/scalesetpriority", None),
])
def test_node_labels_come_from_the_named_cloud_and_are_neutral_by_default(
    tmp_path: Path, cloud: str | None, spot_selector: dict[str, str], spot_toleration: str | None,
    accelerator: str | None,
) -> None:
    """A GPU pod compiled for GKE stays Pending on EKS, AKS or on-premises: no cloud's labels
    unless one is named."""
    opts = dataclasses.replace(ROOT, cloud=cloud) if cloud else ROOT
    _, platform = load_ir(compile_pipeline(il.spec(policies.policies), tmp_path / "p.yaml", opts))
    train = platform["exec-train"]
    selector = train["nodeSelector"]["labels"]
    assert {k: v for k, v in selector.items() if k != "pool"} == {
        **spot_selector, **({accelerator: "nvidia-h200-141gb"} if accelerator else {})}
    keys = {t["key"] for t in train["tolerations"]}
    assert keys - {"nvidia.com/gpu"} == ({spot_toleration} if spot_toleration else set())


def test_a_neutral_compile_says_what_it_left_to_the_cluster(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from interlock.adapters.kfp.backend import KfpBackend

    with caplog.at_level("WARNING", logger="interlock.kfp"):
        KfpBackend().compile(il.spec(policies.policies), tmp_path / "p.yaml", KfpOptions(pipeline_root="s3://b/r", image="i:1"))
    text = caplog.text
    assert "step 'train' is interruptible but no spot node labels are set" in text
    assert "asks for accelerator 'nvidia-h200': compiled as a GPU count only" in text
    caplog.clear()
    with caplog.at_level("WARNING", logger="interlock.kfp"):
        KfpBackend().compile(il.spec(policies.policies), tmp_path / "q.yaml", KfpOptions(pipeline_root="s3://b/r", image="i:1",
                                                                                         cloud="gke"))
    assert "spot node labels" not in caplog.text
    with pytest.raises(PolicyError, match="cloud='gcp' is not one of"):
        KfpOptions.from_options(cloud="gcp")


@pytest.mark.parametrize(("accelerator", "labels"), [
    ("nvidia-h200", {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}),
    ("nvidia-h100", {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}),
    ("nvidia-a100", {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}),
    ("nvidia-a100:1g.5gb", {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
                            "cloud.google.com/gke-gpu-partition-size": "1g.5gb"}),
])
def test_gke_gets_its_own_accelerator_names(tmp_path: Path, accelerator: str, labels: dict[str, str]) -> None:
    @il.step(resources=il.Resources(gpu=1, accelerator=accelerator))
    def fit(x: int) -> int:
        return x

    @il.pipeline(name="gke-names")
    def gke_names(x: int = 1):
        return fit(x=x)

    _, platform = load_ir(compile_pipeline(il.spec(gke_names), tmp_path / "p.yaml",
                                           dataclasses.replace(ROOT, cloud="gke")))
    assert platform["exec-fit"]["nodeSelector"]["labels"] == labels


def test_gke_refuses_an_accelerator_it_does_not_offer(tmp_path: Path) -> None:
    @il.step(resources=il.Resources(gpu=1, accelerator="nvidia-a10g"))  # an AWS GPU
    def fit(x: int) -> int:
        return x

    @il.pipeline(name="gke-unknown")
    def gke_unknown(x: int = 1):
        return fit(x=x)

    with pytest.raises(il.PolicyError, match="accelerator 'nvidia-a10g' is not a GPU GKE offers") as raised:
        compile_pipeline(il.spec(gke_unknown), tmp_path / "p.yaml", dataclasses.replace(ROOT, cloud="gke"))
    assert "nvidia-h200" in (raised.value.hint or "") and "accelerator_label" in (raised.value.hint or "")
    # Under a label of one's own the name goes through as written.
    _, platform = load_ir(compile_pipeline(il.spec(gke_unknown), tmp_path / "q.yaml",
                                           dataclasses.replace(ROOT, accelerator_label="node.example/gpu")))
    assert platform["exec-fit"]["nodeSelector"]["labels"] == {"node.example/gpu": "nvidia-a10g"}
