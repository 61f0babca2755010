"""What a KFP task process imports before its step runs: every module here is paid once per
task (kfp-local starts a process per task; a cluster a pod). The task needs the runtime shim
and its node's slice of the spec, not a compiler or a library its step does not use.

Each check runs ``run_node`` in a fresh interpreter, as kfp's executor does, with the step's
module on PYTHONPATH, and reads ``sys.modules`` there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import interlock as il
from interlock.adapters.kfp.node_task import NodeTask
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.run.env import RunEnv
from interlock.core.run.state import RunState

# What a task never needs: the libraries that compile or drive a pipeline, and the heavy ones
# a step that does not use them should not pay for (one process per task).
HEAVY = ("flytekit", "kfp.compiler", "kfp.dsl.pipeline_context", "torch", "pandas", "mlflow", "airflow")

STEPS = textwrap.dedent("""
    import interlock as il

    @il.step
    def inc(x: int) -> int:
        return x + 1
""")

WITH_PIPELINE = STEPS + textwrap.dedent("""
    @il.pipeline
    def chain(x: int = 1):
        return inc(x=x)
""")

CHILD = textwrap.dedent("""
    import json, sys
    from interlock.adapters.kfp.entry import run_node
    ref, node, fp, args, task, watch = json.loads(sys.argv[1])
    returned = run_node(ref, node, fp, args, task)
    print(json.dumps({"returned": returned, "loaded": sorted(m for m in watch if m in sys.modules)}))
""")


def task_of(module: str, source: str, tmp_path: Path) -> tuple[PipelineSpec, str]:
    (tmp_path / f"{module}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        steps = __import__(module)

        @il.pipeline(name="one-step")
        def one(x: int = 1):  # noqa: ANN202
            return steps.inc(x=x)

        spec = il.spec(one)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(module, None)
    return spec, NodeTask.of(spec, "inc").dumps()


def loaded_in_task(module: str, source: str, tmp_path: Path) -> dict:
    spec, task = task_of(module, source, tmp_path)
    state = tmp_path / "state"
    env = {**os.environ, **RunEnv(run_id="r-imports", state_dir=state, backend="kfp").to_env(),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    call = [f"{module}:inc", "inc", spec.step_of("inc").fingerprint, {"x": 1}, task, HEAVY]
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(call)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["returned"] == 2
    frag = RunState(state, "r-imports").read_fragment("inc")
    assert frag is not None and frag.status == "succeeded"  # the shim ran the step
    return out


@pytest.mark.parametrize("source", [STEPS, WITH_PIPELINE], ids=["steps-module", "module-with-its-pipeline"])
def test_a_task_loads_no_compiler_and_no_library_its_step_does_not_use(source: str, tmp_path: Path) -> None:
    loaded = loaded_in_task("task_steps", source, tmp_path)["loaded"]
    assert loaded == []


def test_the_probe_sees_a_library_the_steps_module_imports(tmp_path: Path) -> None:
    assert loaded_in_task("task_pandas_steps", "import pandas\n" + STEPS, tmp_path)["loaded"] == ["pandas"]


def test_entry_still_offers_the_loader() -> None:
    # receipt and finally tasks (and older components) rebuild the spec through entry.load_spec.
    from interlock.adapters.kfp import entry

    assert entry.load_spec(f"{__name__}:one_step").name == "one-step-ref"


@il.step
def double_it(x: int) -> int:
    return 2 * x


@il.pipeline(name="one-step-ref")
def one_step(x: int = 1):  # noqa: ANN201 - a module-level pipeline, for load_spec
    return double_it(x=x)
