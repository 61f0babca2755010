"""What a Flyte 2 cluster receives: the compiled module, imported, read through the SDK's own types."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import flyte
import flyte2_pipelines as fp
import pytest
from flyte2_compiled import import_module

import interlock as il
from interlock.core.base.errors import CapabilityError


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("build")
    [path] = il.compile(fp.policies, backend="flyte2", out=str(out), image="registry.example/fraud:1", store="/mnt/il")
    return Path(path), import_module(Path(path))


def test_each_step_is_a_task_of_the_sdk_and_the_driver_is_the_pipeline(compiled) -> None:  # type: ignore[no-untyped-def]
    path, mod = compiled
    for name in ("step_ingest", "step_train", "step_probe", "step_describe", "f2_policies"):
        assert isinstance(getattr(mod, name), flyte.AsyncFunctionTaskTemplate), name
    assert mod.DRIVER is mod.f2_policies
    assert mod.step_train.short_name == "train"
    assert path.name == "f2_policies_flyte2.py"


def test_one_environment_per_group_of_image_resources_and_secrets(compiled) -> None:  # type: ignore[no-untyped-def]
    _, mod = compiled
    envs = {name: v for name, v in vars(mod).items() if isinstance(v, flyte.TaskEnvironment)}
    # ingest (no resources), train (GPUs, a secret), probe (a MIG slice), describe (cpu/memory), the driver
    assert len(envs) == 5
    assert [id(e) for e in mod.driver_env.depends_on] == [id(e) for n, e in envs.items() if n != "driver_env"]
    assert all(e.image == "registry.example/fraud:1" for e in envs.values())


def test_policies_become_the_sdks_retry_backoff_cache_resources_and_pod_template(compiled) -> None:  # type: ignore[no-untyped-def]
    _, mod = compiled
    train = mod.step_train
    assert train.retries == flyte.RetryStrategy(5, backoff=flyte.Backoff(
        base=timedelta(minutes=5), factor=2.0, cap=timedelta(hours=1)))
    step = il.spec(fp.policies).step("train")
    cache = train.cache
    assert (cache.behavior, cache.version_override, cache.ignored_inputs) == ("auto", step.fingerprint[:16], ())
    assert cache.get_version() == step.fingerprint[:16]  # what the SDK keys its cache on: the code fingerprint
    assert train.interruptible is True
    assert train.timeout == flyte.Timeout(max_runtime=timedelta(hours=2, seconds=60))
    env = next(e for e in vars(mod).values() if isinstance(e, flyte.TaskEnvironment) and train in e.tasks.values())
    assert env.resources == flyte.Resources(cpu="2", memory="4Gi", gpu="H200:2", shm="2Gi")
    assert env.secrets == [flyte.Secret(key="api-key", group="wandb", as_env_var="WANDB_API_KEY")]
    pod = train.pod_template
    assert pod.labels == {"team": "fraud", "kueue.x-k8s.io/queue-name": "team-a",
                          "kueue.x-k8s.io/priority-class": "high"}
    assert pod.pod_spec.node_selector == {"pool": "gpu"}
    [tol] = pod.pod_spec.tolerations
    assert (tol.key, tol.operator, tol.effect) == ("nvidia.com/gpu", "Exists", "NoSchedule")


def test_a_mig_partition_is_the_sdks_gpu_partition(compiled) -> None:  # type: ignore[no-untyped-def]
    _, mod = compiled
    env = next(e for e in vars(mod).values() if isinstance(e, flyte.TaskEnvironment)
               and mod.step_probe in e.tasks.values())
    assert env.resources.gpu == flyte.GPU("H200", 1, partition="1g.18gb")


def test_ignored_inputs_and_a_step_without_retries(compiled) -> None:  # type: ignore[no-untyped-def]
    _, mod = compiled
    assert mod.step_ingest.cache.ignored_inputs == ("note",)
    assert mod.step_ingest.retries == flyte.RetryStrategy(0)
    cache = mod.step_describe.cache
    assert (cache if isinstance(cache, str) else cache.behavior) == "disable"  # no il.Cache: never cached


def test_a_task_takes_its_steps_ports_and_a_maps_task_also_names_its_item(tmp_path: Path) -> None:
    @il.step(cache=il.Cache())
    def bump(x: int) -> int:
        return x + 1

    @il.pipeline(name="f2-ports")
    def pipe(xs: list[int] = [1, 2]):  # noqa: B006 - a pipeline default is data
        return bump.named("once")(x=fp.total(xs=il.map(bump, over=xs)))

    [path] = il.compile(pipe, backend="flyte2", out=str(tmp_path))
    mod = import_module(Path(path))
    assert list(mod.step_once.native_interface.inputs) == ["x"]
    assert mod.step_once.cache.ignored_inputs == ()
    # One task for every item: each call names its item, which is no input of the step's cache key.
    assert list(mod.step_bump.native_interface.inputs) == ["node", "x"]
    assert mod.step_bump.cache.ignored_inputs == ("node",)


def test_the_schedule_is_a_trigger_on_the_driver(compiled) -> None:  # type: ignore[no-untyped-def]
    _, mod = compiled
    [trigger] = mod.DRIVER.triggers
    assert trigger.name == "f2-policies-cron-0"
    assert trigger.automation == flyte.Cron("0 3 * * *")


def test_secret_values_never_reach_the_module(compiled, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    path, _ = compiled
    text = path.read_text()
    assert "wandb" in text and "WANDB_API_KEY" in text  # the request: group, key, variable
    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    out = path.parent / "again"
    [again] = il.compile(fp.policies, backend="flyte2", out=str(out))
    assert "s3cr3t-value" not in Path(again).read_text()


def test_an_accelerator_the_sdk_has_no_name_for_is_refused() -> None:
    @il.step(resources=il.Resources(gpu=1, accelerator="nvidia-tesla-k80"))
    def old(x: int) -> int:
        return x

    @il.pipeline(name="f2-k80")
    def pipe(x: int = 1):
        return old(x=x)

    with pytest.raises(CapabilityError, match="no GPU type for accelerator 'nvidia-tesla-k80'"):
        il.compile(pipe, backend="flyte2", out="unused")
