"""A KFP task runs the node slice compiled into its component, without tracing the pipeline.

Each check that is about what a task process imports runs ``run_node`` in a fresh
interpreter, as kfp's executor does, and reads ``sys.modules`` there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kfp_test_pipelines import failing, typed

import interlock as il
from interlock.adapters.kfp.component import component_source
from interlock.adapters.kfp.entry import run_node
from interlock.adapters.kfp.node_task import NodeTask
from interlock.core.base.errors import StepFailed
from interlock.core.model.spec import StepSpec
from interlock.core.run.env import RunEnv
from interlock.core.run.state import RunState

FATAL_REF = "kfp_test_pipelines.failing:fatal"
TYPED_REF = "kfp_test_pipelines.typed:typed"

CHILD = textwrap.dedent("""
    import json, sys
    from interlock.adapters.kfp.entry import run_node
    from interlock.core.base.errors import StepFailed
    ref, node, fp, args, task = json.loads(sys.argv[1])
    try:
        out = {"returned": run_node(ref, node, fp, args, task)}
    except StepFailed as exc:
        out = {"error": str(exc)}
    mod = sys.modules.get(ref.partition(":")[0])
    pipe = getattr(mod, ref.partition(":")[2], None)
    out["imported"] = sorted(m for m in sys.modules if m.startswith("kfp_test_pipelines") or m == "pandas")
    out["traced"] = getattr(pipe, "_spec", None) is not None
    print(json.dumps(out))
""")


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    for key, value in RunEnv(run_id="r-node-task", state_dir=state, backend="kfp").to_env().items():
        monkeypatch.setenv(key, value)
    return state


def in_task_process(ref: str, node: str, fp: str, args: dict, task: str | None) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps([ref, node, fp, args, task])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_component_carries_its_node_slice_of_the_spec() -> None:
    spec = il.spec(typed.typed)
    source = component_source(spec, "total", "total")
    task = NodeTask.of(spec, "total")
    assert repr(task.compact()) in source
    fp = spec.step_of("total").fingerprint
    assert NodeTask.loads(task.compact(), fp) == task
    back = NodeTask.loads(task.dumps())
    assert back == task and back.step == spec.step_of("total")
    assert len(task.dumps()) < 2000  # one step's worth, whatever the size of the pipeline
    assert fp not in task.compact()  # the component passes it once, as run_node's own argument


def test_the_slice_leaves_out_defaults_and_reads_them_back() -> None:
    """The slice is in every component of the compiled YAML: fields at their defaults stay out,
    and every value that differs from a default comes back, falsy ones included."""
    import dataclasses

    from interlock.core.model.policies import Cache
    from interlock.core.model.retry import Retry

    spec = il.spec(typed.typed)
    task = NodeTask.of(spec, "total")
    for name in ("checkpoint", "distributed", "secrets", "annotations", "interruptible", "doc", "map_item"):
        assert f"'{name}'" not in task.compact() and f'"{name}"' not in task.dumps()
    variants = [
        dict(retry=Retry(0)), dict(retry=Retry(transient=2, preempted=1)), dict(timeout_s=0.0),
        dict(cache=Cache(enabled=False)), dict(cache=Cache(version="2", ignore_inputs=("x",))), dict(inputs=()),
        dict(env=(("A", ""),), doc="a step", image="img:1", interruptible=True),
    ]
    for change in variants:
        t = dataclasses.replace(task, step=dataclasses.replace(task.step, **change))
        assert NodeTask.loads(t.dumps()) == t, change
        assert NodeTask.loads(t.compact(), t.step.fingerprint) == t, change


def test_the_compiled_form_runs_in_a_task_process(state: Path) -> None:
    spec = il.spec(typed.typed)
    step = spec.step_of("total")
    out = in_task_process(TYPED_REF, "total", step.fingerprint, {"counts": {"a": 2, "b": 3}},
                          NodeTask.of(spec, "total").compact())
    assert out["returned"] == 5 and out["traced"] is False


def test_a_task_runs_its_step_without_tracing_the_pipeline(state: Path) -> None:
    spec = il.spec(typed.typed)
    step = spec.step_of("total")
    out = in_task_process(TYPED_REF, "total", step.fingerprint, {"counts": {"a": 2, "b": 3}},
                          NodeTask.of(spec, "total").dumps())
    assert out["returned"] == 5
    assert out["traced"] is False  # the step's module was imported; the pipeline was not re-traced
    frag = RunState(state, "r-node-task").read_fragment("total")
    assert frag is not None and frag.status == "succeeded"


def test_a_refused_retry_imports_nothing_of_the_pipeline(state: Path, tmp_path: Path) -> None:
    spec = il.spec(failing.fatal)
    fp = spec.step("doomed").fingerprint
    task = NodeTask.of(spec, "doomed").dumps()
    calls = tmp_path / "calls"
    with pytest.raises(StepFailed):  # the first attempt fails FATAL and leaves a stop marker
        run_node(FATAL_REF, "doomed", fp, {"marker_dir": str(calls)}, task)
    out = in_task_process(FATAL_REF, "doomed", fp, {"marker_dir": str(calls)}, task)
    assert "already failed FATAL" in out["error"]
    assert out["imported"] == []  # neither the pipeline's module nor what it imports
    assert (calls / "doomed").read_text() == "1"


def test_code_that_differs_from_the_compiled_step_is_refused(state: Path) -> None:
    spec = il.spec(typed.typed)
    compiled = NodeTask.of(spec, "total")
    stale = NodeTask(compiled.pipeline, compiled.node, StepSpec.from_json(
        {**compiled.step.to_json(), "fingerprint": "0" * 64}), compiled.bindings, compiled.declared)
    with pytest.raises(StepFailed, match="differs from the compiled pipeline"):
        run_node(TYPED_REF, "total", "0" * 64, {"counts": {"a": 1}}, stale.dumps())


def test_without_the_slice_the_task_loads_the_pipeline_as_before(state: Path) -> None:
    spec = il.spec(typed.typed)
    out = in_task_process(TYPED_REF, "total", spec.step_of("total").fingerprint, {"counts": {"a": 1}}, None)
    assert out["returned"] == 1 and out["traced"] is True


def test_a_retry_of_a_stopped_node_exits_before_importing_the_pipeline(state: Path, tmp_path: Path) -> None:
    from interlock.core.base.status import FailureKind
    from interlock.core.failure.record import Failure
    from interlock.core.run.records import StopMarker

    spec = il.spec(failing.fatal)
    RunState(state, "r-node-task").write_marker("doomed", Failure(
        FailureKind.FATAL, "stopped by SIGTERM", rule="stopped", message="SIGTERM"), StopMarker.STOPPED)
    out = in_task_process(FATAL_REF, "doomed", spec.step("doomed").fingerprint, {"marker_dir": str(tmp_path / "c")},
                          NodeTask.of(spec, "doomed").dumps())
    assert "SIGTERM" in out["error"] and out["imported"] == []
    assert not (tmp_path / "c").exists()  # the step never ran
