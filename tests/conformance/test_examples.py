"""The ported KFP/Flyte samples under docs/examples give the same outcome on every backend
(docs/control-flow.md lists them beside the originals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flyte_conditions
import flyte_nested_conditions
import kfp_condition
import pytest
from _compare import outcome
from backends import runnable_backends

INSTALLED = tuple(runnable_backends())


def _same(pipeline: Any, tmp_path: Path, **params: Any) -> tuple[str, dict, dict]:
    results = {b: outcome(pipeline, b, tmp_path / b, **params) for b in INSTALLED}
    for b, got in results.items():
        assert got == results["local"], f"{b} differs from local"
    return results["local"]


@pytest.mark.parametrize(("seed", "leaf", "number"), [(4, "heads-small", 4), (7, "tails-big", 16)])
def test_kfp_condition_sample(tmp_path: Path, seed: int, leaf: str, number: int) -> None:
    status, outputs, steps = _same(kfp_condition.condition, tmp_path, seed=seed)
    assert status == "succeeded" and outputs["o1"] == ("int", number)
    assert [n for n in ("heads-big", "heads-small", "tails-big", "tails-small") if steps[n] == "succeeded"] == [leaf]


@pytest.mark.parametrize(("radius", "status", "value"), [(0.5, "succeeded", 3.141593), (11.0, "failed", None)])
def test_flyte_conditions_sample(tmp_path: Path, radius: float, status: str, value: float | None) -> None:
    got, outputs, steps = _same(flyte_conditions.shape_properties, tmp_path, radius=radius)
    assert got == status
    if value is not None:
        assert outputs == {"o0": ("float", value)}
    else:
        assert steps["too-big"] == "failed"


@pytest.mark.parametrize(("radius", "status", "ran"), [(0.6, "succeeded", "inner-area"), (0.95, "failed", "not-supported")])
def test_flyte_nested_conditions_sample(tmp_path: Path, radius: float, status: str, ran: str) -> None:
    got, _, steps = _same(flyte_nested_conditions.nested_conditions, tmp_path, radius=radius)
    assert got == status
    assert steps[ran] == ("succeeded" if status == "succeeded" else "failed")


def test_flyte_failure_node_sample_runs_what_does_not_depend_on_the_failure(tmp_path: Path) -> None:
    import failure_policy

    status, _, steps = _same(failure_policy.wf1, tmp_path)
    assert status == "failed"
    assert steps == {"create_cluster": "succeeded", "t1": "failed", "delete_cluster": "not-run",
                     "clean_up": "succeeded", "failure-node-subwf.create_cluster": "succeeded",
                     "failure-node-subwf.t1": "failed", "failure-node-subwf.delete_cluster": "not-run",
                     "failure-node-subwf.clean_up": "succeeded"}
