"""Serialized tasks really execute: `pyflyte-execute` in a subprocess, as a Flyte pod runs it.

The command line (resolver and loader args) is taken from the compiled protobuf, the inputs
are a LiteralMap file, and the test reads back the outputs.pb / error.pb the entrypoint writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from flyte_pipelines.basic import TrainParams, demo
from flyte_pipelines.faults import broken_pipeline, flaky_pipeline
from flyteidl.admin import task_pb2
from flyteidl.core import errors_pb2, literals_pb2
from flytekit.core.context_manager import FlyteContext, FlyteContextManager
from flytekit.core.data_persistence import FileAccessProvider
from flytekit.core.type_engine import TypeEngine
from flytekit.models.literals import LiteralMap

import interlock as il
from interlock.core.model.codecs import ARTIFACT_META, dataframe_hash
from interlock.core.run.files import last_object


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[FlyteContext]:
    """A flytekit context whose blobs go to tmp_path (inputs we build for the subprocess)."""
    files = FileAccessProvider(local_sandbox_dir=str(tmp_path / "sandbox"), raw_output_prefix=str(tmp_path / "in-raw"))
    with FlyteContextManager.with_context(FlyteContextManager.current_context().with_file_access(files)) as c:
        yield c


def _task_spec(spec: il.PipelineSpec, node: str, out: Path) -> task_pb2.TaskSpec:
    files = il.compile(spec, backend="flyte", out=out, project="p", domain="d", version="v1", image="img:1")
    [path] = [f for f in files if f.name.endswith(f"_{spec.name}.{node}_1.pb")]
    msg = task_pb2.TaskSpec()
    msg.ParseFromString(path.read_bytes())
    return msg


def _execute(
    ts: task_pb2.TaskSpec, inputs: LiteralMap, work: Path, *, state: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the task's own command line; ``state=False`` leaves run id and state dir to Flyte's ids."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "inputs.pb").write_bytes(inputs.to_flyte_idl().SerializeToString())
    container = ts.template.container if ts.template.HasField("container") else None
    if container is not None:
        args, task_env = list(container.args), {e.key: e.value for e in container.env}
    else:  # a pod template: the primary container carries the same command
        [primary] = [c for c in _pod_containers(ts) if c["name"] == "primary"]
        args, task_env = primary["args"], {e["name"]: e["value"] for e in primary.get("env", [])}
    subst = {
        "{{.input}}": str(work / "inputs.pb"), "{{.outputPrefix}}": str(work / "outputs"),
        "{{.rawOutputDataPrefix}}": str(work / "raw"), "{{.checkpointOutputPrefix}}": str(work / "ckpt"),
        "{{.prevCheckpointPrefix}}": '""',
    }
    cmd = [subst.get(a, a) for a in args]
    assert cmd[0] == "pyflyte-execute"
    full_env = {**os.environ, **task_env, **env}
    # In the image the environment's scripts are on PATH; here that is this interpreter's bin.
    full_env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), full_env.get("PATH", "")])
    if state:
        full_env.update(INTERLOCK_STATE_DIR=str(work / "state"), INTERLOCK_RUN_ID="f1a2b3")
    else:  # what propeller sets in every task pod
        full_env.update(FLYTE_INTERNAL_EXECUTION_ID="f9x8y7", FLYTE_INTERNAL_EXECUTION_PROJECT="p",
                        FLYTE_INTERNAL_EXECUTION_DOMAIN="d", FLYTE_ATTEMPT_NUMBER="0")
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=120, cwd=work)


def _pod_containers(ts: task_pb2.TaskSpec) -> list[dict[str, Any]]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(ts.template.k8s_pod.pod_spec)["containers"]


def _outputs(work: Path) -> LiteralMap:
    msg = literals_pb2.LiteralMap()
    msg.ParseFromString((work / "outputs" / "outputs.pb").read_bytes())
    return LiteralMap.from_flyte_idl(msg)


def _error(work: Path) -> errors_pb2.ErrorDocument:
    msg = errors_pb2.ErrorDocument()
    msg.ParseFromString((work / "outputs" / "error.pb").read_bytes())
    return msg


def test_ingest_writes_a_hashed_dataframe(tmp_path: Path, ctx: FlyteContext) -> None:
    ts = _task_spec(demo.spec, "ingest", tmp_path / "pb")
    inputs = TypeEngine.dict_to_literal_map(ctx, {"snapshot": "s9", "rows": 4}, {"snapshot": str, "rows": int})
    proc = _execute(ts, inputs, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]

    lit = _outputs(tmp_path / "run").literals["o0"]
    df = TypeEngine.to_python_value(ctx, lit, pd.DataFrame)
    assert list(df["snap"]) == ["s9"] * 4 and list(df["x"]) == [0.0, 1.0, 2.0, 3.0]
    assert lit.hash == dataframe_hash(df)  # the cache key sees content, not the blob URI
    receipt = last_object((tmp_path / "run" / "state" / "receipts" / "ingest.json").read_bytes())
    assert receipt["status"] == "succeeded"


def test_train_reads_dataframe_and_dataclass_and_writes_a_model_directory(tmp_path: Path, ctx: FlyteContext) -> None:
    ts = _task_spec(demo.spec, "train", tmp_path / "pb")
    frame = pd.DataFrame({"x": [1.0, 3.0], "y": [0, 1]})
    inputs = TypeEngine.dict_to_literal_map(
        ctx, {"train": frame, "params": TrainParams(lr=0.5, epochs=3)}, {"train": pd.DataFrame, "params": TrainParams}
    )
    proc = _execute(ts, inputs, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]

    lit = _outputs(tmp_path / "run").literals["o0"]
    model_dir = Path(lit.scalar.blob.uri)
    assert (model_dir / "weights.txt").read_text() == "mean=2.0 epochs=3 resumed_from=0"
    assert json.loads((model_dir / ARTIFACT_META).read_text()) == {"kind": "model", "metadata": {"lr": 0.5}}
    assert lit.hash  # directories are content-hashed too


@pytest.mark.parametrize(
    ("pipeline", "node", "inputs", "kind", "recoverable"),
    [
        (flaky_pipeline, "flaky", {"x": 1, "fail_times": 99}, "TRANSIENT", True),
        (broken_pipeline, "broken", {"x": 1}, "FATAL", False),
    ],
)
def test_failures_map_to_flyte_error_kinds(
    tmp_path: Path, ctx: FlyteContext, pipeline: il.Pipeline, node: str, inputs: dict[str, int], kind: str,
    recoverable: bool,
) -> None:
    ts = _task_spec(pipeline.spec, node, tmp_path / "pb")
    lm = TypeEngine.dict_to_literal_map(ctx, inputs, {k: int for k in inputs})
    counter = tmp_path / "count"
    # No INTERLOCK_STATE_DIR / RUN_ID: as on a cluster, the Flyte execution id and working dir serve.
    proc = _execute(ts, lm, tmp_path / "run", state=False, INTERLOCK_TEST_COUNTER=str(counter))
    assert proc.returncode == 0  # the entrypoint reports the failure in error.pb, as on a cluster

    err = _error(tmp_path / "run").error
    expected = errors_pb2.ContainerError.RECOVERABLE if recoverable else errors_pb2.ContainerError.NON_RECOVERABLE
    assert err.kind == expected
    assert f"({kind})" in err.message
    # One attempt in the pod: on a cluster Flyte owns TRANSIENT retries, and FATAL gets none.
    assert counter.read_text() == "1"


def test_closed_gate_noop_task_runs_in_its_container(tmp_path: Path, ctx: FlyteContext) -> None:
    files = il.compile(demo, backend="flyte", out=tmp_path / "pb", project="p", domain="d", version="v1", image="img:1")
    [path] = [f for f in files if f.name.endswith("_flyte-demo.gate-closed_1.pb")]
    ts = task_pb2.TaskSpec()
    ts.ParseFromString(path.read_bytes())
    args = list(ts.template.container.args)
    assert args[args.index("--") + 1:] == ["noop", "flyte-demo"]
    proc = _execute(ts, LiteralMap(literals={}), tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _outputs(tmp_path / "run").literals == {}
    assert not (tmp_path / "run" / "outputs" / "error.pb").exists()
