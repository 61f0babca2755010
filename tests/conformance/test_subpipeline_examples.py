"""The ported sub-pipeline samples under docs/examples give the same outcome on every backend
(docs/control-flow.md lists them beside the originals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flyte_subworkflows
import pipeline_in_pipeline
import pytest
from _compare import outcome
from backends import runnable_backends
from doc_blocks import first_block_after

INSTALLED = tuple(runnable_backends())


def _same(pipeline: Any, tmp_path: Path, **params: Any) -> tuple[str, dict, dict]:
    results = {b: outcome(pipeline, b, tmp_path / b, **params) for b in INSTALLED}
    for b, got in results.items():
        assert got == results["local"], f"{b} differs from local"
    return results["local"]


def test_kfp_pipeline_in_pipeline_sample(tmp_path: Path) -> None:
    status, outputs, steps = _same(pipeline_in_pipeline.my_pipeline, tmp_path)
    assert status == "succeeded" and outputs == {"o0": ("str", "Hello"), "o1": ("str", "world!")}
    assert (steps["hello.world"], steps["hello.bye"]) == ("succeeded", "skipped")
    assert (steps["world.world"], steps["world.bye"]) == ("skipped", "succeeded")


def test_flyte_subworkflows_sample(tmp_path: Path) -> None:
    status, outputs, steps = _same(flyte_subworkflows.parent_wf, tmp_path, a=1)
    assert status == "succeeded" and outputs == {"o0": ("int", 3), "o1": ("str", "world"), "o2": ("str", "world")}
    status, outputs, steps = _same(flyte_subworkflows.nested_parent_wf, tmp_path / "nested", a=3)
    assert outputs["o0"] == ("int", 5) and outputs["o3"] == ("str", "world")
    assert set(steps) == {"my-subwf.t1", "my-subwf.t1-2", "parent-wf.t1", "parent-wf.my-subwf.t1",
                          "parent-wf.my-subwf.t1-2"}


def test_the_guide_example_runs_as_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/control-flow.md, "Sub-pipelines": the code block runs and prints what it says."""
    import contextlib
    import io
    import runpy

    code = first_block_after("docs/control-flow.md", "## Sub-pipelines")
    path = tmp_path / "guide_subpipelines.py"
    path.write_text(code)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        monkeypatch.chdir(tmp_path)  # the guide runs without a workdir: ./.interlock here, not in the checkout
        runpy.run_path(str(path), run_name="__main__")
    lines = out.getvalue().splitlines()
    assert lines[0] == "{'o0': 'long:11', 'o1': 'long:2'}"
    assert "'describe.measure'" in lines[1] and "'describe-b.long'" in lines[1]
