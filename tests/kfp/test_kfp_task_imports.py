"""What a KFP task process imports before its step runs: every module here is paid once per
task (kfp-local starts a process per task; a cluster a pod). The task needs the runtime shim
and its node's slice of the spec, not the pipeline builder, il.run's machinery or receipts.

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

import interlock as il
from interlock.adapters.kfp.node_task import NodeTask
from interlock.core.runstate import RunEnv, RunState
from interlock.core.spec import PipelineSpec

# Not needed to run one node from its compiled slice. Of the pipeline builder, only the
# decorator's module loads, and only when the step's module itself declares a pipeline.
NOT_FOR_A_STEP = ("interlock.core.api", "interlock.core.backends", "interlock.core.receipt", "interlock.core.plugins",
                  "interlock.core.trackers", "uuid")
# Loaded only by a step that uses them (a context, a state store, a timedelta, a scratch dir):
# each is paid by every task process otherwise.
ONLY_WHEN_USED = ("interlock.core.checkpoint", "interlock.core.metrics", "interlock.core.statestore", "datetime",
                  "tempfile",
                  # CheckpointPolicy, Torchrun, Secret, Toleration: a step that sets none never creates them
                  "interlock.core.policies_opt_in",
                  # the failure rule table: built when a failure is classified, never for a step that succeeds
                  "interlock.core.failure_rules",
                  # what the shim decides after a failure (Decision, RetryTracker)
                  "interlock.core.retry_decisions",
                  # a Failure (made when a step fails or a recorded one is read back) and a
                  # stop marker as read back (a retry of a node stopped earlier in the run)
                  "interlock.core.failure_record", "interlock.core.marker",
                  # durations: parsed for a step's timeout or a Backoff, neither of which this step sets
                  "interlock.core.durations",
                  # Backoff: only a policy that retries contention has one
                  "interlock.core.backoff")
# il.map's modules (MapSpec, the KFP loop's envelopes): loaded by an item's task, not a plain step's.
ONLY_FOR_A_MAP = ("interlock.core.fanout", "interlock.adapters.kfp.fanout")
BUILDER = ("interlock.core.pipeline", "interlock.core.build", "interlock.core.graph", "interlock.core.conditions")
# Only the process that watches a run needs the whole pipeline's graph (PipelineSpec, Node,
# Gate: pipeline_spec.py) and settles it (outcomes.py); a task reads its own node's slice.
# hashlib loads OpenSSL (2.5 ms a task): a step's fingerprint is hashed without it (digest.py).
PARENT_ONLY = ("interlock.core.pipeline_spec", "interlock.core.outcomes", "hashlib", "_hashlib", "math", "glob")
# The same, by name: the classes moved out of spec.py and runstate.py, still served from there
# on first use (PEP 562); a task must not have asked for them.
PARENT_ONLY_NAMES = (("interlock.core.spec", "PipelineSpec"), ("interlock.core.spec", "Node"),
                     ("interlock.core.spec", "Gate"), ("interlock.core.runstate", "settle"),
                     ("interlock.core.runstate", "RunOutcome"), ("interlock.core.runstate", "StepOutcome"))

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
    ref, node, fp, args, task, watch, names = json.loads(sys.argv[1])
    returned = run_node(ref, node, fp, args, task)
    made = [f"{m}.{n}" for m, n in names if n in vars(sys.modules.get(m, sys))]
    print(json.dumps({"returned": returned, "loaded": sorted(m for m in watch if m in sys.modules), "made": made}))
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
    call = [f"{module}:inc", "inc", spec.step_of("inc").fingerprint, {"x": 1}, task,
            [*NOT_FOR_A_STEP, *BUILDER, *ONLY_WHEN_USED, *ONLY_FOR_A_MAP, *PARENT_ONLY], PARENT_ONLY_NAMES]
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(call)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["returned"] == 2
    frag = RunState(state, "r-imports").read_fragment("inc")
    assert frag is not None and frag.status == "succeeded"  # the shim ran the step
    return out


def test_a_task_of_a_steps_module_imports_no_builder_and_no_run_machinery(tmp_path: Path) -> None:
    assert loaded_in_task("task_steps_only", STEPS, tmp_path)["loaded"] == []


def test_a_module_that_declares_its_pipeline_imports_the_decorator_alone(tmp_path: Path) -> None:
    # The probe sees an import: declaring the pipeline needs il.pipeline's module; the builder
    # and the graph checks load when the pipeline is traced, which a task never does.
    assert loaded_in_task("task_steps_and_pipeline", WITH_PIPELINE, tmp_path)["loaded"] == ["interlock.core.pipeline"]


def test_a_task_neither_builds_the_pipeline_graph_nor_settles_nor_loads_hashlib(tmp_path: Path) -> None:
    # With a pipeline declared in the step's module too: decorating one needs none of them.
    out = loaded_in_task("task_parent_only", WITH_PIPELINE, tmp_path)
    assert [m for m in out["loaded"] if m in PARENT_ONLY] == []
    assert out["made"] == []


def test_a_plain_step_loads_no_checkpoint_metrics_or_state_store(tmp_path: Path) -> None:
    # The step takes no context and the run has no state store: the shim runs it, writes its
    # fragment (checked in loaded_in_task), and none of these modules is imported.
    loaded = loaded_in_task("task_plain_step", STEPS, tmp_path)["loaded"]
    assert [m for m in loaded if m in ONLY_WHEN_USED] == []


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
