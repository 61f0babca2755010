"""Names and parameters are checked when declared; a failure after a step is a failed step
with a receipt (issue 11, item 9)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import interlock as il
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.pipeline import run_option_names


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("b/train", "'/'"),
        ("x" * 300, "300 characters"),
        ("x" * 64, "64 characters"),
        ("a.b", "'.'"),
        ("2fast", "start with a letter"),
        ("trä", "'ä'"),
        ("-x", "start with a letter"),
    ],
)
def test_bad_step_names_are_refused_when_declared(name: str, why: str) -> None:
    with pytest.raises(PipelineDefinitionError) as err:
        @il.step(name=name)
        def f(x: int) -> int:
            return x
    assert why in str(err.value) and "letters, digits, '_' or '-'" in str(err.value)


@pytest.mark.parametrize("name", ["train", "train_model", "Train-2", "x" * 63])
def test_good_step_names_pass(name: str) -> None:
    @il.step(name=name)
    def f(x: int) -> int:
        return x

    assert f.name == name


def test_bad_node_names_are_refused() -> None:
    @il.step
    def f(x: int) -> int:
        return x

    with pytest.raises(PipelineDefinitionError, match="invalid node name 'b/train'"):
        f.named("b/train")

    @il.step(name="y" * 62)
    def g(x: int) -> int:
        return x

    @il.pipeline(name="twice")
    def twice():
        return g(x=g(x=1))  # the second node would be "yyy...-2": 64 characters

    with pytest.raises(PipelineDefinitionError, match="64 characters"):
        il.spec(twice)


@pytest.mark.parametrize("option", ["cache", "run_id", "workdir", "backend", "options", "progress", "raise_on_failure"])
def test_pipeline_parameters_named_like_run_options_are_refused(option: str) -> None:
    assert option in run_option_names()
    ns: dict = {}
    src = f"import interlock as il\n@il.pipeline(name='p')\ndef p({option}: int = 1):\n    pass\n"
    with pytest.raises(PipelineDefinitionError) as err:
        exec(compile(src, "<p>", "exec"), ns)  # noqa: S102 - one parameter name per case
    assert f"parameter {option!r} has the name of an il.run option" in str(err.value)
    assert f"rename it (e.g. {option}_)" in str(err.value)


def test_other_parameters_still_pass_as_keywords(tmp_path: Path) -> None:
    from core_pipelines import integrity

    assert il.run(integrity.small_one, backend="local", workdir=tmp_path, n=4).outputs == {"o0": 5}


def test_an_output_that_cannot_be_written_fails_the_step_with_a_receipt(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    from core_pipelines import integrity

    result = il.run(integrity.unwritable_output, backend="local", workdir=tmp_path, raise_on_failure=False)
    assert result.status == "failed"
    assert result.steps["unwritable"].status == "failed"
    assert result.steps["after_unwritable"].status == "not-run"
    assert "outputs could not be written" in result.error.reason and result.error.step == "unwritable"
    receipt = json.loads(Path(result.receipt_path).read_text())
    step = next(s for s in receipt["steps"] if s["node"] == "unwritable")
    assert step["status"] == "failed" and step["failure_kinds"] == ["FATAL"]
    with pytest.raises(il.StepFailed, match="outputs could not be written"):
        il.run(integrity.unwritable_output, backend="local", workdir=tmp_path)


def test_a_full_disk_after_the_step_fails_it_with_a_receipt(tmp_path: Path) -> None:
    from core_pipelines import integrity

    run_dir = tmp_path / "runs" / "r-full"
    run_dir.mkdir(parents=True)
    (run_dir / "values").write_text("in the way")  # the values directory cannot be created: an OSError
    result = il.run(integrity.small_one, backend="local", workdir=tmp_path, run_id="r-full", raise_on_failure=False)
    assert result.steps["small"].status == "failed"
    receipt = json.loads(Path(result.receipt_path).read_text())
    assert receipt["status"] == "failed" and receipt["steps"][0]["status"] == "failed"
    assert receipt["steps"][0]["attempts"][-1]["failure"]["kind"] == "FATAL"


def test_run_option_names_are_il_run_keywords() -> None:
    # Spelled in core/dsl/pipeline.py (decorating a pipeline must not import il.run's machinery):
    # exactly il.run's keywords, in its order, so a new il.run option is refused as a parameter name.
    keywords = tuple(n for n, p in inspect.signature(il.run).parameters.items()
                     if p.kind is not inspect.Parameter.VAR_KEYWORD)
    assert run_option_names() == keywords


def test_decorating_a_pipeline_does_not_import_the_run_machinery(tmp_path: Path) -> None:
    # A KFP task imports the step's module, which often declares the pipeline too.
    code = ("import sys, interlock as il\n@il.step\ndef f(x: int) -> int:\n    return x\n"
            "@il.pipeline\ndef p(x: int = 1):\n    return f(x=x)\n"
            "print(sorted(m for m in ('interlock.core.backend.api', 'interlock.core.backend.protocol', 'interlock.core.record.receipt')"
            " if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
