"""What a person expects of the command line: `run FILE --help` lists the pipeline's
parameters, `--version`, `runs`, a JSON hint for container parameters, a wrong backend or
option refused before anything is announced, and a script's pipeline that runs once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from core_pipelines import cli_demo

from interlock.core.cli.main import EXIT_FAILED, EXIT_USAGE, main

FILE = str(Path(cli_demo.__file__).resolve())
GREET = f"{FILE}:greet"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_run_help_lists_the_pipelines_parameters_with_types_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "run", GREET, "--help")
    assert rc == 0
    assert "usage: interlock run" in out and "--backend" in out
    params = out.split("parameters", 1)[1]
    assert 'name                 str                    default: "world"' in params
    assert "times                int                    default: 2" in params
    assert "loud                 bool                   default: false" in params


def test_run_help_without_a_pipeline_is_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "run", "--help")
    assert rc == 0 and "usage: interlock run" in out and "parameters (-p" not in out
    rc, _, err = run_cli(capsys, "run")
    assert rc == EXIT_USAGE and "name a pipeline" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("interlock 0.")


def test_container_parameter_that_is_not_json_says_json_is_expected(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas", reason="the reference pipeline needs pandas (an extra)")  # the CLI reports the ImportError
    target = str(Path(__file__).resolve().parents[2] / "reference_pipelines" / "fraud_retrain.py")
    rc, _, err = run_cli(capsys, "run", target, "-p", "params={epochs:10}")
    assert rc == EXIT_USAGE
    assert "cannot read '{epochs:10}' as Optional[TrainParams] (expected JSON)" in err  # params may be omitted (None: the champion's)
    assert """-p 'params={"hidden": 32}'""" in err  # the dataclass's own first field


@pytest.mark.parametrize("argv, message", [
    (["--backend", "kubeflow"], "unknown backend 'kubeflow'"),
    (["--option", "no_such=1"], "has no run option(s) ['no_such']; it takes no run options"),
])
def test_a_wrong_backend_or_option_fails_before_the_run_is_announced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str,
) -> None:
    rc, _, err = run_cli(capsys, "run", GREET, "--workdir", str(tmp_path), *argv)
    assert rc in (EXIT_USAGE, EXIT_FAILED)
    assert message in err and "running" not in err
    assert not (tmp_path / "runs").exists()


def test_runs_lists_past_runs_with_status_duration_and_cost(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    assert run_cli(capsys, "runs", "--workdir", str(tmp_path))[1].strip() == "no runs yet"
    assert run_cli(capsys, "run", GREET, "--workdir", str(tmp_path), "--run-id", "first")[0] == 0
    assert run_cli(capsys, "run", f"{FILE}:greet_badly", "--workdir", str(tmp_path), "--run-id", "second")[0] == EXIT_FAILED
    rc, out, _ = run_cli(capsys, "runs", "--workdir", str(tmp_path))
    lines = out.strip().splitlines()
    assert rc == 0 and lines[0].split()[:4] == ["RUN", "ID", "PIPELINE", "BACKEND"]
    assert lines[1].split()[:4] == ["second", "greet-badly", "local", "failed"]  # newest first
    assert lines[2].split()[:4] == ["first", "greet", "local", "succeeded"]
    assert lines[2].split()[-1].startswith("$") and lines[2].split()[-2].endswith("s")
    rows = json.loads(run_cli(capsys, "runs", "--workdir", str(tmp_path), "--json")[1])
    assert [r["status"] for r in rows] == ["failed", "succeeded"] and rows[1]["duration_s"] > 0


SCRIPT = '''
import interlock as il

@il.step
def double(x: int) -> int:
    print("double ran", flush=True)
    return 2 * x

@il.pipeline(name="script-demo")
def script_demo(x: int = 3):
    return double(x=x)

{call}
'''


@pytest.mark.parametrize("guarded", [True, False])
def test_a_script_runs_its_pipeline_once_and_compiles(tmp_path: Path, guarded: bool) -> None:
    """The README's example saved as a file: `python file.py` runs and compiles it (the
    pipeline's ref is the file's module, not __main__), and `interlock run file.py` runs it
    once; an unguarded top-level il.run is refused (it would run the pipeline twice), saying
    what to write instead."""
    pytest.importorskip("kfp", reason="the script compiles for kfp (an extra)")  # in a subprocess
    call = textwrap.dedent(f'''
        result = il.run(script_demo, backend="local", workdir={str(tmp_path / "w")!r})
        print("outputs", result.outputs)
        print(il.compile(script_demo, backend="kfp", out={str(tmp_path / "p.yaml")!r}))
    ''')
    body = SCRIPT.format(call=("if __name__ == '__main__':\n" + textwrap.indent(call, "    ")) if guarded else call)
    script = tmp_path / "readme_example.py"
    script.write_text(body)
    direct = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert direct.returncode == 0, direct.stderr
    assert "outputs {'o0': 6}" in direct.stdout and (tmp_path / "p.yaml").exists()
    assert "readme_example" in (tmp_path / "p.yaml").read_text()  # the component imports the file's module
    cli = subprocess.run([sys.executable, "-m", "interlock.core.cli.main", "run", str(script), "--workdir",
                          str(tmp_path / "cli")], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    if guarded:
        assert cli.returncode == 0, cli.stderr
        assert (cli.stdout + cli.stderr).count("double ran") == 1
    else:
        assert cli.returncode == EXIT_USAGE, cli.stderr
        assert "calls il.run(script-demo) at its top level" in cli.stderr
        assert 'if __name__ == "__main__":' in cli.stderr and "double ran" not in cli.stdout + cli.stderr
