"""A secret never reaches what interlock records or prints, on any backend: an il.Secret's
value quoted in an exception, a password parameter passed through an output and quoted by a
later step, a URL password returned as a pipeline output, a constant bound to a
credential-named port. Driven through `interlock run`, tracked in MLflow; every file the run
leaves (receipt, report, fragments, markers, spec, MLflow's store and artifacts) and the CLI
output are searched. The values store and kfp's executor outputs hold the data a step hands
the next one, not a record: they are left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from backends import runnable_backends

from conformance import secret_pipelines as sp

MODULE = "conformance.secret_pipelines"


def _run(tmp_path: Path, backend: str, pipeline: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DB_PASSWORD": sp.SECRET_VALUE}
    return subprocess.run(
        [sys.executable, "-m", "interlock.core.cli.main", "run", f"{MODULE}:{pipeline}", "--backend", backend,
         "--workdir", str(tmp_path / "wd"), "--run-id", "s1", "-p", f"store={tmp_path / 'mlflow'}", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )


def _leaks(tmp_path: Path, secret: str) -> list[str]:
    found = []
    for path in tmp_path.rglob("*"):
        parts = path.relative_to(tmp_path).parts
        if not path.is_file() or "values" in parts or ("kfp" in parts and "root" in parts):
            continue
        if secret.encode() in path.read_bytes():
            found.append(str(path.relative_to(tmp_path)))
    return found


def _records(tmp_path: Path) -> list[str]:
    state = tmp_path / "wd" / "runs" / "s1" / "state"
    return [p.name for p in (state / "receipt.json", state / "report.html", state / "spec.json") if p.is_file()]


@pytest.mark.parametrize("backend", runnable_backends())
@pytest.mark.parametrize("debug", [False, True], ids=["default", "debug"])
def test_a_secret_quoted_in_an_exception_is_masked_everywhere(tmp_path: Path, backend: str, debug: bool) -> None:
    proc = _run(tmp_path, backend, "secret_in_error", *(["--debug"] if debug else []))
    assert proc.returncode == 1, proc.stderr
    assert "login to db refused for password ***" in proc.stderr
    assert sp.SECRET_VALUE not in proc.stdout + proc.stderr
    assert _records(tmp_path) == ["receipt.json", "report.html", "spec.json"]
    assert list((tmp_path / "wd" / "runs" / "s1" / "state" / "markers").iterdir())  # the FATAL marker is searched
    assert _leaks(tmp_path, sp.SECRET_VALUE) == []


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_secret_passed_through_an_output_is_masked_where_a_later_step_quotes_it(tmp_path: Path, backend: str) -> None:
    proc = _run(tmp_path, backend, "secret_passed_on")
    assert proc.returncode == 1, proc.stderr
    assert "bad credential ***" in proc.stderr
    assert sp.PASSWORD not in proc.stdout + proc.stderr
    assert _leaks(tmp_path, sp.PASSWORD) == []
    assert _leaks(tmp_path, sp.CONST_PASSWORD) == []  # a constant bound to a credential port: not in spec.json


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_url_password_in_a_pipeline_output_is_not_an_mlflow_tag(tmp_path: Path, backend: str) -> None:
    proc = _run(tmp_path, backend, "url_output")
    assert proc.returncode == 0, proc.stderr
    assert _leaks(tmp_path, sp.URL_PASSWORD) == [], proc.stdout
    assert sp.URL_PASSWORD not in proc.stdout + proc.stderr  # the CLI's outputs lines too
    probe = subprocess.run([sys.executable, "-m", "conformance.mlflow_probe", str(tmp_path / "mlflow"), "url-output"],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, f"{probe.stderr}\nthe run said:\n{proc.stderr[-3000:]}"
    (run,) = json.loads(probe.stdout)
    assert run["tags"]["interlock.output.o0"] == "postgres://***redacted***@db/x"


@pytest.mark.parametrize("compiler", ["kfp", "flyte"])
def test_compiling_a_secret_literal_says_where_it_is_written(tmp_path: Path, compiler: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """A compiled pipeline must hold its defaults and constants as written (the cluster runs
    them); compiling says which of them look secret, and what to write instead."""
    pytest.importorskip({"kfp": "kfp", "flyte": "flytekit"}[compiler])
    import interlock as il

    keywords = {"image": "registry.example/team/image:1"} if compiler == "flyte" else {}
    il.compile(sp.secret_passed_on, compiler, tmp_path / "out", **keywords)
    il.compile(sp.url_output, compiler, tmp_path / "out2", **keywords)
    said = " ".join(r.getMessage() for r in caplog.records if r.name == "interlock.compile")
    assert "the default of parameter 'password'" in said
    assert "the constant input 'api_password' of step 'login'" in said
    assert "the default of parameter 'url'" in said
    assert "read them from an il.Secret" in said
    assert sp.PASSWORD not in said and sp.CONST_PASSWORD not in said
