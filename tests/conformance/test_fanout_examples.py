"""The fan-out examples ported from public KFP and Flyte samples (docs/examples/) give the
expected outputs, types included, on local, flyte-local and kfp-local."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from backends import backend_params

import interlock as il

EXAMPLES = {
    "parallelfor_collected": "add_pipeline",
    "parallelfor_artifacts": "artifacts_pipeline",
    "map_task_partial": "map_workflow",
    "map_over_step_output": "loop_output",
    "map_zip": "orders",
}
RUNNABLE = backend_params()


@pytest.mark.parametrize("backend", RUNNABLE)
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_ported_example_gives_the_original_result(example: str, backend: str, tmp_path: Path) -> None:
    module = importlib.import_module(f"docs.examples.{example}")
    result = il.run(getattr(module, EXAMPLES[example]), backend=backend, workdir=tmp_path)
    assert result.outputs == module.EXPECTED
    # The same JSON text: an int stays an int, a float a float, on every backend.
    assert json.dumps(result.outputs, sort_keys=True) == json.dumps(module.EXPECTED, sort_keys=True)
    assert all(str(o.status) == "succeeded" for o in result.steps.values())


def test_every_example_is_listed_in_the_guide() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "control-flow-map.md").read_text()
    for example in EXAMPLES:
        assert f"examples/{example}.py" in guide
