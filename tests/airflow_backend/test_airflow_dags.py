"""What an Airflow deployment receives from ``interlock compile --backend airflow``: DAG files
that a real ``DagBag`` loads without import errors (every conformance pipeline, both operator
forms), whose parsing imports no pipeline module, flytekit, kfp, torch or pandas, and whose
tasks carry the step's policies natively (KubernetesPodOperator resources, GPUs, tolerations,
/dev/shm, Kueue labels, secrets as references; dynamic task mapping; trigger rules).

Airflow configures itself at import, once per process: DAGs are parsed in a fresh
interpreter (``parse_dags.py``), never in the pytest process.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("airflow")
pytest.importorskip("airflow.providers.cncf.kubernetes")

import interlock as il  # noqa: E402
from interlock.core.dsl.pipeline import Pipeline  # noqa: E402

HERE = Path(__file__).resolve().parent
CONFORMANCE = ("pipelines", "branch_pipelines", "default_pipelines", "fanout_pipelines", "finally_block_pipelines",
               "finally_pipelines", "handler_pipelines", "join_pipelines", "outcome_pipelines", "policy_pipelines",
               "stop_pipelines", "sub_pipelines", "subpipeline_finally_pipelines", "value_pipelines", "zip_pipelines",
               "nested_finally_pipelines", "fallback_pipelines", "model_file_pipelines")
# What parsing a generated DAG file may import of interlock: the loader, the task bodies it
# references and the retry policy a TaskFlow task carries; and the trigger bridge's provider
# metadata (stdlib only), which Airflow's providers manager imports for any DAG file.
PARSE_TIME_MODULES = {"interlock", "interlock.adapters", "interlock.adapters.airflow",
                      "interlock.adapters.airflow.loader", "interlock.adapters.airflow.tasks",
                      "interlock.adapters.airflow.retry_policy",
                      "interlock.plugins", "interlock.plugins.airflow", "interlock.plugins.airflow.provider"}


def conformance_pipelines() -> dict[str, Pipeline]:
    found: dict[str, Pipeline] = {}
    for name in CONFORMANCE:
        mod = importlib.import_module(f"conformance.{name}")
        for value in vars(mod).values():
            if isinstance(value, Pipeline):
                found.setdefault(il.spec(value).name, value)
    return found


def parse(folder: Path, tmp_path: Path) -> dict:
    """Load ``folder`` with a DagBag in a fresh interpreter, as the scheduler's parser does."""
    out = tmp_path / "parsed.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path / "airflow-home"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGS_FOLDER=str(folder),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{tmp_path / 'unused.db'}")
    proc = subprocess.run([sys.executable, str(HERE / "parse_dags.py"), str(folder), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("operator", ["taskflow", "kubernetes"])
def test_every_conformance_pipeline_loads_in_a_dagbag_without_importing_its_code(tmp_path: Path, operator: str) -> None:
    pipelines = conformance_pipelines()
    assert len(pipelines) > 40
    dags = tmp_path / "dags"
    refused: dict[str, str] = {}
    for name, p in pipelines.items():
        try:
            written = il.compile(p, backend="airflow", out=dags, operator=operator, image="registry.example/team:1")
        except il.CapabilityError as exc:  # refused at build time, naming the construct
            refused[name] = str(exc)
            continue
        assert [f.suffix for f in written] == [".py", ".json"]
    assert all("cannot express 'distributed'" in why for why in refused.values()), refused
    assert len(refused) <= 2
    pipelines = {k: v for k, v in pipelines.items() if k not in refused}
    parsed = parse(dags, tmp_path)
    assert parsed["errors"] == {}
    assert sorted(parsed["dags"]) == sorted(pipelines)
    # The scheduler parses every few seconds: no pipeline module, no ML library at parse time.
    assert parsed["modules"] == []
    # Parsing costs what a hand-written DAG costs: the loader turns the compiled description
    # into Airflow objects and imports nothing of interlock's core (no spec, no plan).
    assert not [m for m in parsed["interlock"] if m.startswith("interlock.core")], parsed["interlock"]
    assert set(parsed["interlock"]) <= PARSE_TIME_MODULES, parsed["interlock"]
    assert "interlock.adapters.airflow.loader" in parsed["interlock"]
    for name, p in pipelines.items():
        spec = il.spec(p)
        tasks = parsed["dags"][name]["tasks"]
        for node in spec.nodes:
            assert node.name in tasks, (name, node.name)
        assert sorted(parsed["dags"][name]["params"]) == sorted(q.name for q in spec.params)


def test_the_dag_file_holds_no_pipeline_code(tmp_path: Path) -> None:
    from conformance.pipelines import linear

    dag_file, sidecar = il.compile(linear, backend="airflow", out=tmp_path)
    text = dag_file.read_text()
    assert "from interlock.adapters.airflow.loader import load_dag" in text
    assert "conformance" not in text and "add_one" not in text
    assert json.loads(sidecar.read_text())["spec"]["name"] == "conf-linear"


def test_constructs_render_as_native_airflow_constructs(tmp_path: Path) -> None:
    from conformance.fanout_pipelines import tolerant_cached
    from conformance.finally_pipelines import with_finally
    from conformance.pipelines import gate

    for p in (tolerant_cached, gate, with_finally):
        il.compile(p, backend="airflow", out=tmp_path / "dags", operator="taskflow")
    dags = parse(tmp_path / "dags", tmp_path)["dags"]
    mapped = dags[il.spec(tolerant_cached).name]["tasks"]
    assert mapped["cached_fragile"]["mapped"] is True  # partial().expand(): one instance per item
    assert mapped["cached_fragile.items"]["upstream"] == []  # it maps over a parameter
    assert mapped["cached_fragile"]["upstream"] == ["cached_fragile.items"]
    assert mapped["cached_fragile.collect"]["trigger_rule"] == "all_done"  # folds failed items too
    assert sorted(mapped["cached_fragile.collect"]["upstream"]) == ["cached_fragile", "cached_fragile.items"]
    assert mapped["present"]["upstream"] == ["cached_fragile.collect"]  # the fan-in reads the folded list
    gated = dags["conf-gate"]["tasks"]
    (when,) = [t for t, d in gated.items() if t.endswith(".when")]
    assert gated[when]["operator"] == "@task.short_circuit"
    inside = [n.name for n in il.spec(gate).nodes if n.gate]
    assert inside
    for n in inside:  # a closed gate skips the block: its tasks start after it, or after one inside it
        assert when in gated[n]["upstream"] or set(gated[n]["upstream"]) & set(inside), n
    final = il.spec(with_finally).finally_
    assert final is not None
    fin = dags[il.spec(with_finally).name]["tasks"][final.name]
    assert fin["trigger_rule"] == "all_done"
    assert set(fin["upstream"]) >= {n.name for n in il.spec(with_finally).nodes if not n.gate}


@il.step(resources=il.Resources(cpu="4", memory="16Gi", gpu=2, accelerator="nvidia-h200-141gb",
                                shared_memory="8Gi", node_selector={"pool": "gpu"}, queue="team-a",
                                priority_class="high",
                                tolerations=[il.Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule")]),
         labels={"team": "fraud"}, secrets=[il.Secret("wandb", "api-key", env="WANDB_API_KEY")],
         image="registry.example/fraud/train:7", timeout="2h")
def train_on_gpus(x: int) -> int:
    return x


@il.pipeline(name="af-gpu")
def gpu_pipeline(x: int = 1):
    return train_on_gpus(x=x)


def test_a_pod_step_carries_its_policies_natively(tmp_path: Path) -> None:
    il.compile(gpu_pipeline, backend="airflow", out=tmp_path / "dags", state_pvc="interlock-state",
               image_pull_secret="regcred", namespace="ml")
    task = parse(tmp_path / "dags", tmp_path)["dags"]["af-gpu"]["tasks"]["train_on_gpus"]
    pod = task["pod"]
    assert task["operator"] == "KubernetesPodOperator"
    assert pod["image"] == "registry.example/fraud/train:7" and pod["namespace"] == "ml"
    assert pod["cmds"] == ["python", "-m", "interlock.adapters.airflow.entry"]
    assert pod["arguments"] == ["step", "train_on_gpus"]
    assert pod["limits"]["nvidia.com/gpu"] == "2" and pod["requests"] == {"cpu": "4", "memory": "16Gi"}
    assert pod["node_selector"] == {"pool": "gpu", "cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu" and pod["tolerations"][0]["effect"] == "NoSchedule"
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["empty_dir"]["medium"] == "Memory" and shm["empty_dir"]["size_limit"] == "8Gi"
    assert {"name": "dshm", "mount_path": "/dev/shm"}.items() <= next(
        m for m in pod["volume_mounts"] if m["name"] == "dshm").items()
    assert any(v["persistent_volume_claim"] and v["persistent_volume_claim"]["claim_name"] == "interlock-state"
               for v in pod["volumes"])
    assert pod["labels"]["kueue.x-k8s.io/queue-name"] == "team-a" and pod["labels"]["team"] == "fraud"
    assert pod["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    (secret,) = pod["secrets"]
    assert (secret["deploy_type"], secret["deploy_target"], secret["secret"], secret["key"]) == (
        "env", "WANDB_API_KEY", "wandb", "api-key")
    assert pod["image_pull_secrets"] == ["regcred"] and pod["skip_on_exit_code"] == [99]
    assert task["execution_timeout"] == 2 * 3600 + 60 and task["retries"] == 0


@il.step(interruptible=True, resources=il.Resources(node_selector={"pool": "gpu"}))
def on_spot(x: int) -> int:
    return x


@il.step
def on_demand(x: int) -> int:
    return x


@il.pipeline(name="af-spot")
def spot_pipeline(x: int = 1):
    return on_demand(x=on_spot(x=x))


def test_interruptible_pods_go_to_the_spot_nodes_the_compile_names(tmp_path: Path) -> None:
    il.compile(spot_pipeline, backend="airflow", out=tmp_path / "dags",
               spot_selector="cloud.google.com/gke-spot=true", spot_toleration="cloud.google.com/gke-spot=true")
    tasks = parse(tmp_path / "dags", tmp_path)["dags"]["af-spot"]["tasks"]
    spot, demand = tasks["on_spot"]["pod"], tasks["on_demand"]["pod"]
    assert spot["node_selector"] == {"pool": "gpu", "cloud.google.com/gke-spot": "true"}
    (toleration,) = spot["tolerations"]
    assert (toleration["key"], toleration["operator"], toleration["value"], toleration["effect"]) == (
        "cloud.google.com/gke-spot", "Equal", "true", "NoSchedule")
    assert not demand["node_selector"] and not demand["tolerations"]  # only interruptible steps move
    with pytest.raises(il.PolicyError, match="spot_selector='gke-spot' must be KEY=VALUE"):
        il.compile(spot_pipeline, backend="airflow", out=tmp_path / "bad", spot_selector="gke-spot")


def test_a_pod_finds_its_spec_by_the_pipeline_reference_not_a_copy_per_pod(tmp_path: Path) -> None:
    """Each pod carries the pipeline's reference and its step's fingerprint (a DAG of N steps
    holds no N copies of the spec); the entry rebuilds the spec in the image and runs the node,
    and refuses an image whose step code differs from the compiled DAG."""
    (_, sidecar) = il.compile(spot_pipeline, backend="airflow", out=tmp_path / "dags")
    doc = json.loads(sidecar.read_text())
    spec = il.spec(spot_pipeline)
    (task,) = [t for t in doc["dag"]["tasks"] if t["id"] == "on_spot"]
    env = task["pod"]["env_vars"]
    assert env["INTERLOCK_AIRFLOW_PIPELINE"] == spec.ref and spec.ref.endswith("test_airflow_dags:spot_pipeline")
    assert env["INTERLOCK_AIRFLOW_FINGERPRINT"] == spec.step_of("on_spot").fingerprint
    assert "INTERLOCK_AIRFLOW_SPEC" not in env and all(len(v) < 1000 for v in env.values())
    # What Airflow renders into the templated variables when the task starts, then the pod's command.
    root = tmp_path / "state-root"
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "INTERLOCK_"))}
    run_env.update(env, INTERLOCK_AIRFLOW_PARAMS=json.dumps({"x": 3}), INTERLOCK_AIRFLOW_DAG_RUN="manual__1",
                   INTERLOCK_AIRFLOW_OPTIONS=json.dumps({"state_root": str(root)}),
                   PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    cmd = [sys.executable, *task["pod"]["cmds"][1:], *task["pod"]["arguments"]]
    proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = (root / "runs").iterdir()
    assert json.loads((run / "values" / "on_spot" / "o0" / "value.json").read_text()) == 3
    run_env["INTERLOCK_AIRFLOW_FINGERPRINT"] = "0" * 64  # the image holds other code than was compiled
    run_env["INTERLOCK_AIRFLOW_DAG_RUN"] = "manual__2"
    proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1 and "differs from the compiled DAG" in proc.stderr, proc.stderr[-3000:]


def test_compile_renders_the_dag_so_that_parsing_only_makes_airflow_objects(tmp_path: Path) -> None:
    """The sidecar's description: each task's kind, trigger rule, upstream ids and group, as
    plain JSON; its size per task does not grow with the pipeline (no spec per task)."""
    from conformance.sub_pipelines import nested

    (_, sidecar) = il.compile(nested, backend="airflow", out=tmp_path / "dags", operator="taskflow")
    desc = json.loads(sidecar.read_text())["dag"]
    assert desc["dag"]["dag_id"] == il.spec(nested).name and desc["dag"]["timetable"] is None
    by_id = {t["id"]: t for t in desc["tasks"]}
    assert {t["kind"] for t in desc["tasks"]} <= {"step", "finally", "items", "mapped", "collect", "gate"}
    for t in desc["tasks"]:  # created in plan order: every upstream task exists before its reader
        assert all(list(by_id).index(u) < list(by_id).index(t["id"]) for u in t["upstream"]), t
    grouped = [t for t in desc["tasks"] if t["group"]]
    assert grouped and all(t["group"] in desc["groups"] for t in grouped)
    parsed = parse(tmp_path / "dags", tmp_path)["dags"][il.spec(nested).name]["tasks"]
    for t in desc["tasks"]:
        assert parsed[t["id"]]["upstream"] == sorted(t["upstream"] + ([t["items"]] if t["kind"] == "mapped" else []))
        assert parsed[t["id"]]["group"] == t["group"]


def _chain(n: int) -> Pipeline:
    def chain(x: int = 0):
        for i in range(n):
            x = on_demand.named(f"s{i}")(x=x)
        return x

    return il.pipeline(name=f"af-chain-{n}")(chain)


@pytest.mark.parametrize("operator", ["taskflow", "kubernetes"])
def test_the_dag_description_grows_linearly_with_the_steps(tmp_path: Path, operator: str) -> None:
    """What the loader reads and builds per task does not grow with the pipeline: no task
    carries the spec (a pod did once: quadratic in the number of steps)."""
    sizes = {}
    for n in (10, 100):
        (_, sidecar) = il.compile(_chain(n), backend="airflow", out=tmp_path / operator, operator=operator)
        tasks = json.loads(sidecar.read_text())["dag"]["tasks"]
        assert len(tasks) == n
        sizes[n] = len(json.dumps(tasks))
    assert sizes[100] < 11 * sizes[10], sizes


def test_interlock_compile_writes_the_dag_folder_and_backends_lists_both(tmp_path: Path, capsys) -> None:
    from interlock.core.cli.main import main

    src = Path(importlib.import_module("conformance.pipelines").__file__)
    assert main(["compile", f"{src}:linear", "--backend", "airflow", "--out", str(tmp_path / "dags"),
                 "--option", "operator=taskflow", "--option", "state_root=/mnt/interlock"]) == 0
    sidecar = json.loads((tmp_path / "dags" / "conf_linear.interlock.json").read_text())
    assert sidecar["options"]["operator"] == "taskflow" and sidecar["options"]["state_root"] == "/mnt/interlock"
    assert (tmp_path / "dags" / "conf_linear.py").is_file()
    capsys.readouterr()
    assert main(["backends"]) == 0
    text = capsys.readouterr().out
    assert "airflow-local" in text and "dynamic task mapping" in text
