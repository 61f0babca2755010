"""The compiled module run for real in the `flyte` SDK's local mode, and flyte2-local around it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import flyte
import flyte2_pipelines as fp
import pytest
from flyte2_compiled import import_module

import interlock as il
from interlock.adapters.flyte2.local import isolated_flyte
from interlock.adapters.flyte2.render import render
from interlock.core.base.status import Status


def _module(tmp_path: Path, pipeline: il.Pipeline):  # type: ignore[no-untyped-def]
    """The module as `interlock compile --backend flyte2` writes it for a cluster (Flyte retries)."""
    path = tmp_path / "module.py"
    path.write_text(render(il.spec(pipeline), store=str(tmp_path / "store")))
    return import_module(path)


def test_flyte_retries_a_transient_failure_and_never_a_fatal_one(tmp_path: Path) -> None:
    mod = _module(tmp_path, fp.retries)
    folder = tmp_path / "counts"
    folder.mkdir()
    with isolated_flyte(tmp_path / "flyte-cache"), pytest.raises(Exception, match="f2-retries.*fatal"):
        flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw"),
                              run_base_dir=str(tmp_path / "base")).run(mod.DRIVER, folder=str(folder))
    assert (folder / "flaky").read_text() == "2"  # the shim handed the TRANSIENT failure back: Flyte's retry
    assert (folder / "fatal").read_text() == "1"  # NonRecoverableError: no retry, with 2 left
    assert mod.step_fatal.retries == flyte.RetryStrategy(2)


def test_the_module_runs_in_local_mode_with_maps_and_branches(tmp_path: Path) -> None:
    mod = _module(tmp_path, fp.shapes)
    with isolated_flyte(tmp_path / "flyte-cache"):
        run = flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw"),
                                    run_base_dir=str(tmp_path / "base")).run(mod.DRIVER, n=4)
    from interlock.adapters.flyte2 import values

    out = run.outputs()[0] if isinstance(run.outputs(), tuple) else run.outputs().o0
    import json

    ref = json.loads(out)["o0"]
    assert values.get(tmp_path / "store", ref, il.spec(fp.shapes).output_types[0][1]) == 14 * 14


def test_flyte2_local_agrees_with_local_and_caches_the_second_run(tmp_path: Path, isolated_home: Path) -> None:
    runs = {}
    for backend in ("local", "flyte2-local", "flyte2-local"):
        runs.setdefault(backend, []).append(il.run(fp.shapes, backend=backend, workdir=str(tmp_path / backend), n=3))
    local, (first, second) = runs["local"][0], runs["flyte2-local"]
    assert first.outputs == local.outputs == {"o0": 1}
    assert {k: s.status for k, s in first.steps.items()} == {k: s.status for k, s in local.steps.items()}
    assert second.steps["items"].status is Status.CACHED and second.outputs == {"o0": 1}
    assert second.steps["total"].status is Status.SUCCEEDED  # no il.Cache: it runs again
    assert not (isolated_home / ".flyte").exists()  # the SDK's cache lives in the work directory
    assert (tmp_path / "flyte2-local" / "cache" / "flyte2" / "local-cache" / "cache.db").is_file()


def test_flyte_run_accepts_the_compiled_module_unchanged(tmp_path: Path, isolated_home: Path) -> None:
    [path] = il.compile(fp.shapes, backend="flyte2", out=str(tmp_path / "build"), store=str(tmp_path / "store"))
    flyte_cli = Path(sys.executable).with_name("flyte")
    done = subprocess.run([str(flyte_cli), "run", "--local", str(path), "f2_shapes", "--n", "5"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(isolated_home)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert list((tmp_path / "store" / "runs").iterdir())  # the shim ran in `flyte run`'s tasks


def test_a_sub_pipeline_call_is_a_nested_driver_task(tmp_path: Path) -> None:
    [path] = il.compile(fp.outer, backend="flyte2", out=str(tmp_path / "build"), store=str(tmp_path / "store"))
    mod = import_module(Path(path))
    [call] = [v for k, v in vars(mod).items() if k.startswith("call_")]
    assert isinstance(call, flyte.AsyncFunctionTaskTemplate) and call.short_name == "sub:f2-inner"
    flyte2 = il.run(fp.outer, backend="flyte2-local", workdir=str(tmp_path / "f2"), n=3)
    local = il.run(fp.outer, backend="local", workdir=str(tmp_path / "local"), n=3)
    assert flyte2.outputs == local.outputs == {"o0": 25}
    assert {k: s.status for k, s in flyte2.steps.items()} == {k: s.status for k, s in local.steps.items()}
    assert set(flyte2.steps) == {"f2-inner.items", "f2-inner.square", "f2-inner.total", "after"}


def test_independent_steps_run_at_once_in_the_compiled_driver(tmp_path: Path) -> None:
    """The cluster's module awaits independent steps together; each of the two waits for the
    other to start, so a driver that ran them one after another would fail."""
    source = render(il.spec(fp.siblings), store=str(tmp_path / "store"))
    assert "await asyncio.gather(  # independent steps, at once\n" in source
    assert "    d.step('left', step_left),\n" in source and "    d.step('right', step_right),\n" in source
    assert "        await d.step('both', step_both)\n" in source  # it reads both: after them
    mod = _module(tmp_path, fp.siblings)
    folder = tmp_path / "meet"
    folder.mkdir()
    with isolated_flyte(tmp_path / "flyte-cache"):
        run = flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw"),
                                    run_base_dir=str(tmp_path / "base")).run(mod.DRIVER, folder=str(folder))
    import json

    from interlock.adapters.flyte2 import values

    out = run.outputs()[0] if isinstance(run.outputs(), tuple) else run.outputs().o0
    ref = json.loads(out)["o0"]
    assert values.get(tmp_path / "store", ref, il.spec(fp.siblings).output_types[0][1]) == "left+right"
    serial = render(il.spec(fp.siblings), store=str(tmp_path / "store"), concurrent=False)
    assert "asyncio.gather(  # independent" not in serial
    assert serial.index("d.step('left'") < serial.index("d.step('right'") < serial.index("d.step('both'")
