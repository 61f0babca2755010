"""`interlock compile --backend flyte`: assertions on the registrable protobufs themselves."""

from __future__ import annotations

import json
import os
import sys
import tarfile
from pathlib import Path

import pytest
from flyte_pipelines.basic import demo
from flyte_pipelines.dist import dist_pipeline, dist_shapes
from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2
from flyteidl.core import types_pb2
from google.protobuf.json_format import MessageToDict

import interlock as il
from interlock.adapters.flyte.backend import FlyteBackend, FlyteCompileOptions, FlyteLocalBackend
from interlock.adapters.flyte.policies import accelerator
from interlock.adapters.flyte.resolver import resolver
from interlock.core.base.errors import PipelineDefinitionError, PolicyError

SECRET_VALUE = "s3cr3t-value-never-compiled"


def _compile(spec: il.PipelineSpec, out: Path) -> dict[str, Path]:
    files = il.compile(spec, backend="flyte", out=out, project="fraud", domain="production", version="v7",
                       image="ghcr.io/acme/train:v7")
    return {f.name: f for f in files}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    os.environ["WANDB_API_KEY"] = SECRET_VALUE  # present at compile time, must not be compiled in
    try:
        return _compile(demo.spec, tmp_path_factory.mktemp("pb"))
    finally:
        del os.environ["WANDB_API_KEY"]


def _task(files: dict[str, Path], node: str) -> task_pb2.TaskSpec:
    [path] = [p for n, p in files.items() if n.endswith(f"_flyte-demo.{node}_1.pb")]
    msg = task_pb2.TaskSpec()
    msg.ParseFromString(path.read_bytes())
    return msg


def _workflow(files: dict[str, Path]) -> workflow_pb2.WorkflowSpec:
    [path] = [p for n, p in files.items() if n.endswith("_flyte-demo_2.pb")]
    msg = workflow_pb2.WorkflowSpec()
    msg.ParseFromString(path.read_bytes())
    return msg


def _launch_plan(files: dict[str, Path], name: str) -> launch_plan_pb2.LaunchPlan:
    [path] = [p for n, p in files.items() if n.endswith(f"_{name}_3.pb")]
    msg = launch_plan_pb2.LaunchPlan()
    msg.ParseFromString(path.read_bytes())
    return msg


def test_writes_pyflyte_package_layout(compiled: dict[str, Path]) -> None:
    names = sorted(compiled)
    kinds = {n.rsplit("_", 1)[-1] for n in names if n.endswith(".pb")}
    assert kinds == {"1.pb", "2.pb", "3.pb"}
    assert sum(n.endswith("_1.pb") for n in names) == 8  # 7 steps + the closed-gate no-op
    assert any(n.endswith("_flyte-demo.gate-1_2.pb") for n in names)
    with tarfile.open(compiled["flyte-package.tgz"]) as tar:
        assert sorted(tar.getnames()) == [n for n in names if n.endswith(".pb")]


def test_task_interfaces_are_typed(compiled: dict[str, Path]) -> None:
    ingest = _task(compiled, "ingest").template.interface
    assert ingest.inputs.variables["snapshot"].type.simple == types_pb2.STRING
    assert ingest.inputs.variables["rows"].type.simple == types_pb2.INTEGER
    assert ingest.outputs.variables["o0"].type.HasField("structured_dataset_type")

    split = _task(compiled, "split").template.interface
    assert sorted(split.outputs.variables) == ["test", "train"]  # NamedTuple fields, several outputs

    train = _task(compiled, "train").template.interface
    assert sorted(train.inputs.variables) == ["params", "train"]  # the StepContext is not an input
    params = train.inputs.variables["params"].type
    assert params.simple == types_pb2.STRUCT
    assert MessageToDict(params.metadata)["title"] == "TrainParams"
    model = train.outputs.variables["o0"].type
    assert model.blob.dimensionality == types_pb2.BlobType.MULTIPART  # il.Model is a directory

    metrics = _task(compiled, "evaluate").template.interface.outputs.variables["o0"].type
    assert metrics.map_value_type.simple == types_pb2.FLOAT
    assert _task(compiled, "decide").template.interface.outputs.variables["o0"].type.simple == types_pb2.BOOLEAN


def test_retries_interruptible_timeout_cache(compiled: dict[str, Path]) -> None:
    train = _task(compiled, "train").template.metadata
    # transient 2 + preempted 3 are Flyte retries; contention backs off inside the pod.
    assert train.retries.retries == 5
    assert train.interruptible is True
    assert train.timeout.seconds == 7200
    assert train.discoverable is True
    assert train.discovery_version == demo.spec.step("train").fingerprint[:16]
    assert _task(compiled, "ingest").template.metadata.discovery_version == demo.spec.step("ingest").fingerprint[:16]
    decide = _task(compiled, "decide").template.metadata
    assert decide.discoverable is False and decide.interruptible is False
    assert decide.retries.retries == il.Retry().transient + il.Retry().preempted


def test_resources_accelerator_shared_memory_and_pod_template(compiled: dict[str, Path]) -> None:
    t = _task(compiled, "train").template
    pod = MessageToDict(t.k8s_pod.pod_spec)
    [container] = pod["containers"]
    assert container["name"] == "primary"
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "4Gi", "gpu": "1"}
    assert container["resources"]["limits"] == {"memory": "4Gi", "gpu": "1"}
    assert container["image"] == "ghcr.io/acme/train:v7"
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert dict(t.k8s_pod.metadata.labels) == {"team": "fraud"}
    assert dict(t.k8s_pod.metadata.annotations) == {"owner": "ml@example.com"}
    assert t.extended_resources.gpu_accelerator.device == "nvidia-h200"
    assert t.extended_resources.shared_memory.size_limit == "2Gi"
    # A step without pod-level policies stays a plain container.
    assert _task(compiled, "decide").template.HasField("container")


def test_secrets_are_requests_never_values(compiled: dict[str, Path]) -> None:
    [secret] = _task(compiled, "train").template.security_context.secrets
    assert (secret.group, secret.key, secret.env_var) == ("wandb", "api-key", "WANDB_API_KEY")
    assert secret.mount_requirement == secret.ENV_VAR
    for path in compiled.values():
        if path.suffix == ".pb":
            assert SECRET_VALUE.encode() not in path.read_bytes(), path.name


def test_loader_args_name_pipeline_and_node(compiled: dict[str, Path]) -> None:
    args = list(_task(compiled, "ingest").template.container.args)
    resolver = args[args.index("--resolver") + 1]
    assert resolver == "interlock.adapters.flyte.resolver.resolver"
    assert args[args.index("--") + 1:] == ["pipeline", "flyte_pipelines.basic:demo", "node", "ingest", "step", "ingest"]
    env = {e.key: e.value for e in _task(compiled, "ingest").template.container.env}
    assert env["INTERLOCK_RETRY_IN_PROCESS"] == "CONTENTION"


def test_gate_is_a_conditional_with_noop_else_and_a_subworkflow(compiled: dict[str, Path]) -> None:
    wf = _workflow(compiled)
    assert wf.template.id.name == "flyte-demo"
    ids = [n.id for n in wf.template.nodes]
    assert ids == ["ingest", "split", "train", "evaluate", "decide", "gate-1"]
    branch = wf.template.nodes[-1].branch_node.if_else
    cmp = branch.case.condition.comparison
    assert cmp.left_value.var == "decide.o0" and cmp.right_value.primitive.boolean is True
    assert branch.case.then_node.workflow_node.sub_workflow_ref.name == "flyte-demo.gate-1"
    assert branch.else_node.task_node.reference_id.name == "flyte-demo.gate-closed"
    [sub] = wf.sub_workflows
    assert sub.id.name == "flyte-demo.gate-1"
    assert [n.id for n in sub.nodes] == ["register", "notify"]
    assert sorted(sub.interface.inputs.variables) == ["evaluate__o0", "train__o0"]


def test_launch_plans_default_inputs_and_schedule(compiled: dict[str, Path]) -> None:
    lp = _launch_plan(compiled, "flyte-demo")
    assert (lp.id.project, lp.id.domain, lp.id.name, lp.id.version) == ("fraud", "production", "flyte-demo", "v7")
    assert lp.spec.workflow_id.name == "flyte-demo"
    defaults = lp.spec.default_inputs.parameters
    assert defaults["snapshot"].default.scalar.primitive.string_value == "2026-11-01"
    assert defaults["threshold"].default.scalar.primitive.float_value == 0.5
    assert dict(lp.spec.labels.values) == {"cost-center": "ml-42"}
    assert not lp.spec.entity_metadata.HasField("schedule")
    scheduled = _launch_plan(compiled, "flyte-demo-cron-0")
    assert scheduled.spec.entity_metadata.schedule.cron_schedule.schedule == "0 3 * * *"
    assert scheduled.spec.workflow_id.name == "flyte-demo"


def test_distributed_steps_render_with_kfpytorch(tmp_path: Path) -> None:
    files = {f.name: f for f in il.compile(dist_shapes, backend="flyte", out=tmp_path, project="p", domain="d",
                                           version="v1", image="img:1")}

    def task(name: str) -> task_pb2.TaskSpec:
        [path] = [p for n, p in files.items() if n.endswith(f"_flyte-dist-shapes.{name}_1.pb")]
        msg = task_pb2.TaskSpec()
        msg.ParseFromString(path.read_bytes())
        return msg

    fixed = task("fixed_world").template
    assert fixed.type == "pytorch"
    custom = MessageToDict(fixed.custom)
    assert custom["workerReplicas"]["replicas"] == 3  # master + 3 workers = 4 nodes
    assert "elasticConfig" not in custom

    elastic = task("elastic_world").template
    assert elastic.type == "pytorch"
    cfg = MessageToDict(elastic.custom)["elasticConfig"]
    assert (cfg["minReplicas"], cfg["maxReplicas"], cfg["nprocPerNode"]) == (2, 4, 8)
    assert elastic.extended_resources.gpu_accelerator.device == "nvidia-h100"
    assert elastic.extended_resources.shared_memory.mount_path == "/dev/shm"

    single = {f.name: f for f in il.compile(dist_pipeline, backend="flyte", out=tmp_path / "one", project="p",
                                            domain="d", version="v1", image="img:1")}
    [path] = [p for n, p in single.items() if n.endswith("_flyte-dist.allreduce_1.pb")]
    msg = task_pb2.TaskSpec()
    msg.ParseFromString(path.read_bytes())
    assert msg.template.type == "python-task"  # one node: torchrun inside a single pod, no operator
    # The launcher config is code, rebuilt by the resolver in the container: check what it rebuilds.
    args = list(msg.template.container.args)
    task = resolver.load_task(args[args.index("--") + 1:])
    assert type(task.task_config).__name__ == "Elastic"
    assert (task.task_config.nnodes, task.task_config.nproc_per_node) == (1, 2)


def test_accelerator_names_and_partitions() -> None:
    mig = accelerator("nvidia-a100:2g.10gb").to_flyte_idl()
    assert (mig.device, mig.partition_size) == ("nvidia-tesla-a100", "2g.10gb")
    assert accelerator("nvidia-a100-80gb:3g.40gb").to_flyte_idl().partition_size == "3g.40gb"
    assert accelerator("nvidia-h200").to_flyte_idl().device == "nvidia-h200"
    assert accelerator("nvidia-tesla-t4").to_flyte_idl().device == "nvidia-tesla-t4"
    assert accelerator("acme-x1").to_flyte_idl().device == "acme-x1"  # a cluster's own device label
    with pytest.raises(PolicyError, match="MIG"):
        accelerator("nvidia-h100:1g.10gb")


def test_compile_refuses_what_a_container_could_not_run(tmp_path: Path) -> None:
    import dataclasses

    with pytest.raises(PipelineDefinitionError, match="image"):
        FlyteBackend().compile(demo.spec, tmp_path, FlyteCompileOptions(project="p", domain="d", version="v1"))
    script = dataclasses.replace(demo.spec, ref="__main__:demo")
    with pytest.raises(PipelineDefinitionError, match="cannot be imported inside a container"):
        FlyteBackend().compile(script, tmp_path, FlyteCompileOptions(project="p", domain="d", version="v1", image="img:1"))


def test_backends_list_what_flyte_cannot_express() -> None:
    caps = FlyteBackend().capabilities()
    assert caps.features["retry.contention_backoff"].startswith("emulated")
    assert not caps.supports("run")
    assert any("backoff" in line for line in caps.lossy)
    local = FlyteLocalBackend().capabilities()
    assert local.supports("run") and local.supports("distributed")
    assert "flytekit local does not" in local.features["timeout"]
    json.dumps({"features": caps.features, "lossy": list(caps.lossy)})  # printable by `interlock backends`


def test_cli_compile_and_backends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from interlock.core.cli.main import main

    out = tmp_path / "cli"
    rc = main([
        "compile", "flyte_pipelines.basic:demo", "--backend", "flyte", "--out", str(out), "--project", "fraud",
        "--domain", "staging", "--version", "v9", "--image", "ghcr.io/acme/train:v9", "--option", "echo_else=true",
    ])
    assert rc == 0
    printed = capsys.readouterr().out.split()
    assert str(out / "flyte-package.tgz") in printed
    [noop] = out.glob("*_flyte-demo.gate-closed_1.pb")
    msg = task_pb2.TaskSpec()
    msg.ParseFromString(noop.read_bytes())
    assert msg.template.type == "echo"  # no pod for a closed gate
    assert msg.template.id.version == "v9" and msg.template.id.domain == "staging"

    assert main(["backends"]) == 0
    listing = capsys.readouterr().out
    assert "flyte-local" in listing
    assert "! retry.contention_backoff: Flyte retries at once" in listing


def test_compiled_retries_are_what_the_steps_declare(tmp_path: Path) -> None:
    """A step with no retry policy is a plain @task (retries=0); retry=3 is @task(retries=3)."""
    from core_pipelines.ported import ported_pipeline
    from flytekit import task as flyte_task

    files = il.compile(ported_pipeline, backend="flyte", out=tmp_path, project="p", domain="d", version="v1",
                       image="ghcr.io/acme/train:v1")

    def meta(node: str) -> task_pb2.TaskSpec:
        [path] = [p for p in files if p.name.endswith(f"_ported.{node}_1.pb")]
        msg = task_pb2.TaskSpec()
        msg.ParseFromString(path.read_bytes())
        return msg.template.metadata

    @flyte_task
    def bare(x: int) -> int:
        return x

    @flyte_task(retries=3)
    def with_retries(x: int) -> int:
        return x

    assert meta("plain").retries.retries == bare.metadata.retries == 0
    assert meta("in_pod_only").retries.retries == 2  # Retry(transient=2): Flyte retries the recoverable error
    assert meta("ported").retries.retries == with_retries.metadata.retries == 3
    assert meta("ported_cls").retries.retries == 3
    assert meta("taxonomy").retries.retries == 2 + 1  # transient + preempted; contention backs off in the pod
    assert not meta("plain").interruptible


def test_project_domain_and_version_stay_empty_unless_given_as_pyflyte_package(tmp_path: Path) -> None:
    """`flytectl register files -p P -d D --version V` fills them, as for `pyflyte package`."""
    files = {f.name: f for f in il.compile(demo.spec, backend="flyte", out=tmp_path, image="img:1")}
    wf = _workflow(files).template.id
    assert (wf.project, wf.domain, wf.version) == ("", "", "")
    task = _task(files, "ingest").template.id
    assert (task.project, task.domain, task.version) == ("", "", "")
    given = _workflow(_compile(demo.spec, tmp_path / "given")).template.id
    assert (given.project, given.domain, given.version) == ("fraud", "production", "v7")


def test_the_pipeline_docstring_is_the_workflow_description(tmp_path: Path) -> None:
    import dataclasses

    documented = dataclasses.replace(demo.spec, doc="Retrain nightly.\n\nPromotes only a better model.")
    files = {f.name: f for f in il.compile(documented, backend="flyte", out=tmp_path, image="img:1")}
    assert _workflow(files).description.short_description == "Retrain nightly."


def test_pyflyte_run_runs_the_built_workflow(tmp_path: Path) -> None:
    """docs/flyte.md: a module exposing build_entities(...).workflow runs with `pyflyte run`."""
    import shutil
    import subprocess

    entry = tmp_path / "wf_entry.py"
    entry.write_text("import interlock as il\nfrom interlock.adapters.flyte.workflow import build_entities\n"
                     "from core_pipelines.cli_demo import greet\n\n"
                     "greet_wf = build_entities(il.spec(greet)).workflow\n")
    pyflyte = shutil.which("pyflyte") or str(Path(sys.executable).with_name("pyflyte"))
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run([pyflyte, "run", str(entry), "greet_wf", "--name", "ada", "--times", "3"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "ada ada ada" in done.stdout
