"""A missing optional library says what to install, whether a backend or a step needs it
(issue 25, item 11)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import interlock as il

# Runs the CLI as a user without the kfp and flyte extras: ``None`` in sys.modules makes
# both look uninstalled to importlib, as pip uninstall would, without touching the venv.
_WITHOUT_EXTRAS = textwrap.dedent(
    """
    import sys
    for name in ("kfp", "flytekit"):
        sys.modules[name] = None
    from interlock.core.cli.main import main
    sys.exit(main(sys.argv[1:]))
    """
)

PIPELINE = textwrap.dedent(
    """
    import interlock as il

    @il.step
    def double(x: int) -> int:
        return 2 * x

    @il.pipeline(name="double-it")
    def double_it(x: int = 2):
        return double(x=x)
    """
)


def cli_without_extras(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTRAS, *argv],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )


@pytest.mark.parametrize(
    ("verb", "backend", "extra"),
    [("compile", "kfp", "kfp"), ("run", "kfp-local", "kfp"), ("compile", "flyte", "flyte"), ("run", "flyte-local", "flyte")],
)
def test_a_backend_without_its_extra_names_the_extra(tmp_path: Path, verb: str, backend: str, extra: str) -> None:
    (tmp_path / "pipe.py").write_text(PIPELINE)
    argv = [verb, "pipe.py:double_it", "--backend", backend]
    argv += ["--out", str(tmp_path / "out")] if verb == "compile" else ["--workdir", str(tmp_path / "w")]
    done = cli_without_extras(tmp_path, *argv)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr, done.stderr
    assert "BACKEND_NOT_FOUND" in done.stderr and f"pip install 'interlock[{extra}]'" in done.stderr, done.stderr
    runs = cli_without_extras(tmp_path, "runs", "--workdir", str(tmp_path / "w"))
    assert "double-it" not in runs.stdout, "a run that never started is listed"


def test_backends_lists_an_adapter_without_its_extra_as_not_available(tmp_path: Path) -> None:
    out = cli_without_extras(tmp_path, "backends").stdout
    for name in ("kfp", "kfp-local", "flyte", "flyte-local"):
        assert f"{name}\n  not available: backend {name!r} is registered but cannot be imported" in out, out
    assert "local\n  " in out


def test_a_step_missing_a_library_names_the_extra_and_is_not_retried(tmp_path: Path) -> None:
    calls: list[int] = []

    @il.step(retry=il.Retry(transient=2, contention=2))
    def track(x: int) -> int:
        calls.append(x)
        raise ModuleNotFoundError("No module named 'mlflow'", name="mlflow")

    @il.pipeline(name="needs-mlflow")
    def needs_mlflow(x: int = 1):
        return track(x=x)

    with pytest.raises(il.StepFailed) as raised:
        il.run(needs_mlflow, backend="local", workdir=tmp_path)
    failure = raised.value.failure
    assert failure is not None and failure.kind is il.FailureKind.FATAL
    assert failure.rule == "missing-module"
    assert "pip install 'interlock[mlflow]'" in (failure.hint or "")
    assert calls == [1]  # no retry budget for a cause applies: no retry installs a library


@pytest.mark.parametrize(("module", "extra"), [("kfp.dsl", "kfp"), ("flytekit", "flyte"), ("pandera", "pandera"), ("boto3", "s3")])
def test_the_extra_is_read_from_the_package_metadata(module: str, extra: str) -> None:
    failure = il.classify(ModuleNotFoundError(f"No module named {module!r}", name=module))
    assert f"pip install 'interlock[{extra}]'" in (failure.hint or "")


def test_a_library_no_extra_ships_is_named_for_the_image() -> None:
    failure = il.classify(ModuleNotFoundError("No module named 'xgboost'", name="xgboost"))
    assert failure.kind is il.FailureKind.FATAL and "'xgboost'" in (failure.hint or "")
    assert "register_rule" not in (failure.hint or "")
