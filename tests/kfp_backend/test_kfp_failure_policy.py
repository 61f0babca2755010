"""failure_policy on a KFP cluster: KFP starts every task that does not depend on a failure, so
under "stop" the task itself refuses to start once a step of the run failed for good; under
"continue" (KFP's own behaviour) nothing is added. The conformance suite runs both on kfp-local
(tests/conformance/test_failure_policy.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("kfp")

from conformance import policy_pipelines as pp  # noqa: E402

import interlock as il  # noqa: E402
from interlock.adapters.kfp.entry import refuse_after_failure  # noqa: E402
from interlock.adapters.kfp.node_task import NodeTask  # noqa: E402
from interlock.core.base.status import FailureKind  # noqa: E402
from interlock.core.failure.record import Failure  # noqa: E402
from interlock.core.run.records import StopMarker  # noqa: E402
from interlock.core.run.state import RunContext  # noqa: E402


def _run(tmp_path: Path) -> RunContext:
    return RunContext("conf-policy-chains-stop", "r1", "kfp", tmp_path / "state", on_cluster=True)


def test_under_stop_a_cluster_task_does_not_start_after_another_step_failed(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    refuse_after_failure(run, "b_fails")  # nothing failed yet: it starts
    run.state.write_marker("a_fails", Failure(FailureKind.FATAL, "bad input 1"))
    with pytest.raises(SystemExit) as info:
        refuse_after_failure(run, "b_fails")
    assert info.value.code == 1 and run.state.read_fragment("b_fails") is None  # settled as not-run
    assert "b_fails not run: step a_fails failed earlier in run r1" in capsys.readouterr().err


def test_a_map_s_own_failed_item_does_not_stop_its_other_items(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.state.write_marker("work[2]", Failure(FailureKind.FATAL, "bad item"))
    run.state.write_marker("work", Failure(FailureKind.TRANSIENT, "stopped"), StopMarker.STOPPED)
    refuse_after_failure(run, "work")  # one step: its items keep going; a stop marker is no failure


def _ir(policy: str, tmp_path: Path) -> list[Any]:
    p = il.pipeline(name="conf-policy-ir", failure_policy=policy)(pp.blocks_continue.fn)
    [path] = il.compile(p, backend="kfp", out=tmp_path / f"{policy}.yaml")
    return list(yaml.safe_load_all(Path(path).read_text()))


def test_continue_compiles_to_the_dag_a_kfp_user_writes(tmp_path: Path) -> None:
    """KFP's own behaviour is "continue": the same DAG whatever the policy; only the tasks of
    "stop" carry the flag that makes them refuse to start after a failure."""
    go_on, stop = _ir("continue", tmp_path), _ir("stop", tmp_path)
    assert go_on[0]["root"] == stop[0]["root"] and go_on[0]["components"] == stop[0]["components"]
    text = yaml.safe_dump(go_on)
    assert "'stop':True" not in text and "'stop':True" in yaml.safe_dump(stop)


def test_the_node_slice_carries_the_stop_policy() -> None:
    task = NodeTask.of(pp.chains_stop.spec, "a_fails")
    assert task.stop_after_failure and NodeTask.loads(task.compact(), task.step.fingerprint) == task
    assert not NodeTask.of(pp.chains_continue.spec, "a_fails").stop_after_failure
