"""Usage errors end in one line and exit 2, before anything runs (issue 11, item 9)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from core_pipelines import cli_demo

from interlock.core.cli.main import EXIT_USAGE, main

GREET = f"{Path(cli_demo.__file__).resolve()}:greet"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line_error(err: str) -> str:
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("interlock: error")]
    assert len(errors) == 1, err
    return errors[0]


def test_a_syntax_error_in_the_pipeline_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "broken_pipe.py"
    bad.write_text("import interlock as il\n\ndef oops(:\n    pass\n")
    rc, _, err = run_cli(capsys, "run", f"{bad}:p", "--workdir", str(tmp_path / "w"))
    assert rc == EXIT_USAGE
    assert f"syntax error in {bad}, line 3" in one_line_error(err)


def test_a_module_that_fails_while_importing(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "raising_pipe.py"
    bad.write_text("import interlock as il\nx = undefined_name\n")
    rc, _, err = run_cli(capsys, "run", str(bad), "--workdir", str(tmp_path / "w"))
    assert rc == EXIT_USAGE
    line = one_line_error(err)
    assert "NameError" in line and "undefined_name" in line and f"{bad}, line 2" in line


def test_a_target_without_a_module(tmp_path: Path, capsys) -> None:
    rc, _, err = run_cli(capsys, "run", ":greet", "--workdir", str(tmp_path / "w"))
    assert rc == EXIT_USAGE and "no file or module in ':greet'" in one_line_error(err)


def test_an_unwritable_workdir_is_refused_before_anything_runs(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    rc, _, err = run_cli(capsys, "run", GREET, "--workdir", str(blocker / "work"))
    assert rc == EXIT_USAGE and "--workdir" in one_line_error(err) and "cannot write there" in err
    assert "running" not in err


def test_an_unwritable_out_is_refused(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    rc, _, err = run_cli(capsys, "compile", GREET, "--backend", "local", "--out", str(blocker / "out.json"))
    assert rc == EXIT_USAGE and "--out" in one_line_error(err)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "cannot read"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"gpu_hour:default": "cheap"}', "non-negative numbers"),
    ],
)
def test_a_bad_price_table_is_refused_before_any_step_runs(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, content: str | None, why: str,
) -> None:
    prices = tmp_path / "prices.json"
    if content is not None:
        prices.write_text(content)
    monkeypatch.setenv("INTERLOCK_PRICES", str(prices))
    work = tmp_path / "w"
    rc, _, err = run_cli(capsys, "run", GREET, "--workdir", str(work))
    assert rc == EXIT_USAGE
    line = one_line_error(err)
    assert why in line and "INTERLOCK_PRICES" in line
    assert not list(work.glob("runs/*/state/receipts/*.json"))  # no step ran


def test_a_parameter_named_like_a_run_option_is_a_usage_error(tmp_path: Path, capsys) -> None:
    pipe = tmp_path / "collide_pipe.py"
    pipe.write_text(textwrap.dedent("""
        import interlock as il

        @il.step
        def f(x: int) -> int:
            return x

        @il.pipeline(name="collide")
        def collide(cache: int = 1):
            return f(x=cache)
    """))
    rc, _, err = run_cli(capsys, "run", str(pipe), "-p", "cache=2", "--workdir", str(tmp_path / "w"))
    assert rc == EXIT_USAGE and "has the name of an il.run option" in one_line_error(err)


def test_a_good_price_table_is_used(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"cpu_core_hour": 0.0, "memory_gib_hour": 0.0}))
    monkeypatch.setenv("INTERLOCK_PRICES", str(prices))
    rc, out, err = run_cli(capsys, "run", GREET, "--workdir", str(tmp_path / "w"))
    assert rc == 0, err
