"""il.map over a sub-pipeline in the compiled Flyte 2 module: the call's nested driver task,
awaited once per item by the driver (issue 24)."""

from __future__ import annotations

from pathlib import Path

import flyte
import pytest
from conformance import submap_pipelines as sp
from flyte2_compiled import import_module

import interlock as il


@pytest.mark.parametrize(("pipeline", "calls"), [
    (sp.sweep, ["trial"]),
    (sp.nested, ["outer-pair", "outer-pair.inner-pair"]),  # a mapped call inside a mapped call
])
def test_the_driver_awaits_the_calls_driver_task_per_item(pipeline: il.Pipeline, calls: list[str],
                                                          tmp_path: Path) -> None:
    [path] = il.compile(pipeline, backend="flyte2", out=str(tmp_path), store="/mnt/il")
    source = Path(path).read_text()
    mod = import_module(Path(path))
    for name in calls:
        task = getattr(mod, "call_" + name.replace(".", "_").replace("-", "_"))
        assert isinstance(task, flyte.AsyncFunctionTaskTemplate), name
        assert f"await d.call_map({name!r}, {task.func.__name__})" in source
    assert "await d.call(" not in source  # not run once as a plain call
