"""What the shim records of a step's policies in its fragment is worked out once per step spec
(issue 12, item 2: two fragment writes per step each rebuilt it), and is still each step's own:
a different spec, even one made after the first is gone, records its own resources."""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path

import interlock as il
from interlock.core.base.status import Status
from interlock.core.run.files import last_object
from interlock.core.run.records import Fragment
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext, RunState


def _fragment(run: RunContext, node: str) -> dict:
    return last_object(run.state.fragment_path(node).read_bytes())


def test_each_step_spec_records_its_own_resources_and_distribution(tmp_path: Path) -> None:
    @il.step(resources=il.Resources(cpu="2", memory="1Gi"))
    def small(x: int) -> int:
        return x + 1

    run = RunContext("rec", "r1", "local", tmp_path / "state")
    execute_step(run, small.spec, "a", {"x": 1}, fn=small.fn)
    assert _fragment(run, "a")["resources"] == {"cpu": "2", "memory": "1Gi"}
    for gpu in (1, 2, 3):  # new specs, the older ones dropped: never another spec's record
        spec = dataclasses.replace(small.spec, resources=il.Resources(gpu=gpu, accelerator="nvidia-h200"))
        execute_step(run, spec, f"g{gpu}", {"x": 1}, fn=small.fn)
        assert _fragment(run, f"g{gpu}")["resources"] == {"gpu": gpu, "accelerator": "nvidia-h200"}
        del spec
        gc.collect()
    execute_step(run, small.spec, "b", {"x": 2}, fn=small.fn)
    assert _fragment(run, "b")["resources"] == {"cpu": "2", "memory": "1Gi"}
    assert _fragment(run, "b")["distributed"] is None


def test_a_fragment_read_back_has_typed_statuses_and_the_write_returns_its_path(tmp_path: Path) -> None:
    state = RunState(tmp_path / "state", "r1")
    path = state.write_fragment(Fragment(run_id="r1", node="n", step="n", status="succeeded", started=1.0, ended=2.0))
    assert Path(path) == state.fragment_path("n")
    frag = state.read_fragment("n")
    assert frag is not None and frag.status is Status.SUCCEEDED
    assert Fragment(run_id="r1", node="n", step="n", status="failed").status is Status.FAILED
