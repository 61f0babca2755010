"""Wiring mistakes show where a user looks first (issue 25, item 17): a module's pipeline is
built as the module is imported, as flytekit's @workflow and kfp's @dsl.pipeline are, and a
near-miss name gets a "did you mean"."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

import interlock as il
from interlock.core.cli.main import EXIT_USAGE, main

MISWIRED = textwrap.dedent(
    """
    import interlock as il

    @il.step
    def count() -> int:
        return 3

    @il.step
    def shout(msg: str) -> str:
        return msg.upper()

    @il.pipeline(name="miswired")
    def miswired():
        shout(msg=count())
    """
)

FORWARD = textwrap.dedent(
    """
    import interlock as il

    @il.pipeline(name="forward")
    def forward(x: int = 2):
        return double(x=x)  # defined below: built on first use

    @il.step
    def double(x: int) -> int:
        return 2 * x
    """
)


def import_file(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(path.stem, None)
    return module


def test_a_miswired_module_fails_its_import_naming_step_and_port(tmp_path: Path) -> None:
    path = tmp_path / "miswired_pipe.py"
    path.write_text(MISWIRED)
    with pytest.raises(il.PipelineDefinitionError) as info:
        import_file(path)
    err = info.value
    assert (err.pipeline, err.step, err.port) == ("miswired", "shout", "msg")
    assert "output count.o0 is int" in str(err) and "expects str" in str(err)


def test_the_cli_reports_the_import_time_mistake_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "miswired_cli.py"
    path.write_text(MISWIRED)
    rc = main(["run", f"{path}:miswired", "--workdir", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert rc == EXIT_USAGE and "Traceback" not in err, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("interlock: error")]
    assert "step 'shout'" in line and "port 'msg'" in line
    assert not (tmp_path / "w").exists() or not list((tmp_path / "w").rglob("receipt.json"))


def test_a_step_defined_below_its_pipeline_still_works(tmp_path: Path) -> None:
    path = tmp_path / "forward_pipe.py"
    path.write_text(FORWARD)
    module = import_file(path)
    result = il.run(module.forward, backend="local", workdir=tmp_path / "w")  # type: ignore[attr-defined]
    assert result.outputs == {"o0": 4}


@il.step
def snap(snapshot: str) -> str:
    return snapshot


def test_a_near_miss_parameter_gets_a_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    @il.pipeline(name="near-miss")
    def near_miss(snapshot: str = "2026-11-01"):
        return snap(snapshot=snapshot)

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.run(near_miss, backend="local", workdir=tmp_path, snapshop="x")
    assert info.value.hint == "did you mean 'snapshot'?"

    path = tmp_path / "near_cli.py"
    path.write_text(textwrap.dedent(
        """
        import interlock as il

        @il.step
        def snap(snapshot: str) -> str:
            return snapshot

        @il.pipeline(name="near-cli")
        def near_cli(snapshot: str = "2026-11-01"):
            return snap(snapshot=snapshot)
        """
    ))
    rc = main(["run", f"{path}:near_cli", "-p", "snapshop=x", "--workdir", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert rc == EXIT_USAGE and "did you mean 'snapshot'?" in err, err


def test_a_near_miss_step_argument_gets_a_did_you_mean() -> None:
    with pytest.raises(il.PipelineDefinitionError) as info:
        @il.pipeline(name="near-arg")
        def near_arg():
            snap(snapshoot="x")

        il.spec(near_arg)
    assert info.value.port == "snapshoot" and info.value.hint == "did you mean 'snapshot'?"


@il.step
def shout(msg: str) -> str:
    return msg.upper()


@il.step
def count() -> int:
    return 3


def test_every_wiring_mistake_of_a_build_is_reported_at_once() -> None:
    with pytest.raises(il.PipelineDefinitionError) as info:
        @il.pipeline(name="three-mistakes")
        def three_mistakes():
            shout(msg=count())  # int into str
            snap(snapshoot="x")  # a misspelt argument (and so a missing input)
            shout(msg="ok", volume=11)

        il.spec(three_mistakes)
    err = info.value
    assert (err.step, err.port) == ("shout", "msg")  # the first one, as before
    where = [(e.step, e.port) for e in err.more]
    assert where == [("snap", "snapshoot"), ("snap", "snapshot"), ("shout-2", "volume")], str(err)
    text = str(err)
    assert text.count("also:") == 3 and "did you mean 'snapshot'?" in text
