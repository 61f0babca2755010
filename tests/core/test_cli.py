"""The `interlock` command: run, graph, compile, spec, backends, exit codes and messages.

In-process through ``interlock.core.cli.main`` (fast), plus real calls of the installed
console script.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from core_pipelines import cli_demo

import interlock as il
from interlock.core.base import plugins
from interlock.core.cli.main import EXIT_FAILED, EXIT_USAGE, main
from interlock.core.model.pipeline_spec import PipelineSpec

FILE = str(Path(cli_demo.__file__).resolve())
GREET = f"{FILE}:greet"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_run_with_params(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(
        capsys, "run", GREET, "-p", "name=ada", "-p", "times=3", "-p", "loud=true", "--workdir", str(tmp_path),
        "--run-id", "r-cli",
    )
    assert rc == 0, err
    assert "greet: succeeded" in out
    assert "o0: 'ADA ADA ADA'" in out
    receipt = tmp_path / "runs" / "r-cli" / "state" / "receipt.json"
    assert f"receipt: {receipt}" in out
    data = json.loads(receipt.read_text())
    assert data["parameters"] == {"name": "ada", "times": 3, "loud": True}
    assert "running greet on local (2 steps)" in err
    assert "repeat" in err and "style" in err  # progress lines

    rc, out, _ = run_cli(capsys, "run", GREET, "-p", "name=ada", "-p", "times=3", "-p", "loud=1", "--workdir", str(tmp_path))
    assert rc == 0 and "served from cache: style" in out


def test_run_by_module_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(capsys, "run", "core_pipelines.cli_demo:greet", "--workdir", str(tmp_path))
    assert rc == 0, err
    assert "o0: 'world world'" in out


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("times=abc", "pipeline 'greet', port 'times': cannot read 'abc' as int"),
        ("loud=maybe", "cannot read 'maybe' as bool"),
        ("nope=1", "unknown parameter 'nope'; parameters are ['name', 'times', 'loud']"),
        ("times", "parameter 'times' must be key=value"),
    ],
)
def test_bad_params_exit_2_with_a_message(
    param: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_cli(capsys, "run", GREET, "-p", param, "--workdir", str(tmp_path))
    assert rc == EXIT_USAGE == 2
    assert "interlock: error [DEFINITION]" in err and message in err
    assert out == ""
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_failed_step_exits_1_naming_step_kind_hint_and_receipt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(capsys, "run", f"{FILE}:greet_badly", "--workdir", str(tmp_path), "--run-id", "r-bad")
    assert rc == EXIT_FAILED == 1
    assert "FAILED after" in err
    assert "step 'explode' failed (FATAL)" in err
    assert "hint: pass a friendlier name" in err
    assert f"receipt: {tmp_path / 'runs' / 'r-bad' / 'state' / 'receipt.json'}" in err


def test_target_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(capsys, "run", FILE, "--workdir", str(tmp_path))
    assert rc == 2 and "defines 2 pipelines (greet, greet_badly)" in err
    rc, _, err = run_cli(capsys, "run", str(tmp_path / "missing.py"))
    assert rc == 2 and "no such file" in err
    rc, _, err = run_cli(capsys, "run", f"{FILE}:repeat")
    assert rc == 2 and "is not an @il.pipeline" in err
    rc, _, err = run_cli(capsys, "run", GREET, "--backend", "nope", "--workdir", str(tmp_path))
    assert rc == 2 and "unknown backend 'nope'; installed:" in err and "local" in err


def test_graph(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "graph", GREET)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "pipeline greet(name: str, times: int, loud: bool)"
    assert lines[1].startswith("  repeat(name<-pipeline parameter 'name', times<-pipeline parameter 'times') -> o0: str")
    assert lines[2].startswith("  style [cache enabled](")
    assert "text<-output repeat.o0" in lines[2]
    assert lines[3] == "  => o0 = output style.o0"

    rc, out, _ = run_cli(capsys, "graph", GREET, "--format", "mermaid")
    assert rc == 0 and out.startswith("flowchart TD") and "n0 --> n1" in out
    rc, out, _ = run_cli(capsys, "graph", GREET, "--format", "dot")
    assert rc == 0 and out.startswith('digraph "greet"') and '"repeat" -> "style";' in out


def test_compile_and_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(capsys, "compile", GREET, "--backend", "local", "--out", str(tmp_path / "build"))
    assert rc == 0, err
    path = Path(out.strip())
    assert path == tmp_path / "build" / "greet.json"
    assert PipelineSpec.loads(path.read_text()) == il.spec(cli_demo.greet)

    rc, out, _ = run_cli(capsys, "spec", GREET)
    assert rc == 0 and PipelineSpec.loads(out) == il.spec(cli_demo.greet)


def test_usage_errors_come_from_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["compile", GREET])  # --backend and --out are required
    assert info.value.code == 2
    assert "--backend" in capsys.readouterr().err


def console_script() -> str:
    found = Path(sys.executable).with_name("interlock")
    return str(found) if found.exists() else (shutil.which("interlock") or pytest.skip("console script not installed"))


def test_console_script(tmp_path: Path) -> None:
    exe = console_script()
    ok = subprocess.run(
        [exe, "run", GREET, "-p", "name=bo", "-p", "times=2", "--workdir", str(tmp_path / "wd")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    assert "greet: succeeded" in ok.stdout and "o0: 'bo bo'" in ok.stdout
    bad = subprocess.run(
        [exe, "run", GREET, "-p", "times=many", "--workdir", str(tmp_path / "wd")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert bad.returncode == 2
    assert "cannot read 'many' as int" in bad.stderr


def test_null_sets_an_optional_parameter_to_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = "core_pipelines.cli_optional:optional_params"
    rc, out, err = run_cli(capsys, "run", target, "-p", "limit=null", "-p", "tag=null", "--workdir", str(tmp_path))
    assert rc == 0, err
    assert "o0: 'limit=None tag=None'" in out
    rc, out, _ = run_cli(capsys, "run", target, "-p", "limit=7", "-p", "tag=nullish", "--workdir", str(tmp_path))
    assert rc == 0 and "o0: 'limit=7 tag=nullish'" in out
    rc, _, err = run_cli(capsys, "run", GREET, "-p", "times=null", "--workdir", str(tmp_path))
    assert rc == 2 and "cannot read 'null' as int" in err  # not Optional: None is refused


# -- `interlock lineage`: the verb is core's, the options are the lineage provider's ------------


class FakeLineage:
    """A lineage provider made in the tests: one option of its own, answers from a dict."""

    name = "fake"
    title = "Fake Store"

    def __init__(self) -> None:
        self.calls: list[argparse.Namespace] = []

    def record_run(self, run: Any, *, workdir: Path) -> str:
        return str(workdir / "fake")

    def upstream(self, target: str, *, workdir: Path) -> str:
        return f"{target} <- made in {workdir}"

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--depth", type=int, default=1, help="how far upstream")

    def run_cli(self, args: argparse.Namespace) -> str:
        self.calls.append(args)
        if not args.target:
            raise il.InterlockError("fake needs a target")
        return self.upstream(args.target, workdir=args.workdir) + f" (depth {args.depth})"


@pytest.fixture
def fake_lineage(monkeypatch: pytest.MonkeyPatch) -> FakeLineage:
    provider = FakeLineage()
    monkeypatch.setitem(plugins.registry(plugins.LINEAGE), "fake", lambda: provider)
    monkeypatch.setenv("INTERLOCK_LINEAGE", "fake")  # the mlmd plugin is installed too
    return provider


def test_lineage_runs_the_provider_with_its_own_options(
    fake_lineage: FakeLineage, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_cli(capsys, "lineage", "r-1", "--depth", "3", "--workdir", str(tmp_path))
    assert rc == 0, err
    assert out == f"r-1 <- made in {tmp_path} (depth 3)\n"
    rc, out, _ = run_cli(capsys, "lineage", "file:///m")
    assert rc == 0
    [_, default] = fake_lineage.calls
    assert default.workdir == Path(os.environ["INTERLOCK_WORKDIR"]) and default.depth == 1
    assert out == f"file:///m <- made in {default.workdir} (depth 1)\n"

    rc, _, err = run_cli(capsys, "lineage")
    assert rc == EXIT_FAILED and "interlock: error [INTERLOCK]: fake needs a target" in err
    with pytest.raises(SystemExit):
        main(["lineage", "--help"])
    help_text = capsys.readouterr().out
    assert "--depth" in help_text and "--sqlite" not in help_text
    with pytest.raises(SystemExit) as info:
        main(["lineage", "--sqlite", "x.sqlite", "r-1"])  # another provider's option
    assert info.value.code == EXIT_USAGE


def test_lineage_without_a_provider_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plugins, "installed", lambda group: {})
    rc, out, err = run_cli(capsys, "lineage", "r-1")
    assert rc == EXIT_FAILED and out == ""
    assert "interlock: error [LINEAGE_UNAVAILABLE]: no lineage provider installed" in err
    assert "interlock.lineage" in err
    # The other verbs never look a lineage provider up.
    rc, _, err = run_cli(capsys, "graph", GREET)
    assert rc == 0, err


def test_several_lineage_providers_need_a_choice(
    fake_lineage: FakeLineage, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(plugins.registry(plugins.LINEAGE), "other", lambda: FakeLineage())
    monkeypatch.delenv("INTERLOCK_LINEAGE")
    rc, _, err = run_cli(capsys, "lineage", "r-1")
    assert rc == EXIT_FAILED
    assert "several lineage providers are installed (" in err and "fake, " in err and "$INTERLOCK_LINEAGE" in err
    assert fake_lineage.calls == []
