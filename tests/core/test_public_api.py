"""The public names of issue 2 exist, and pipeline outputs come back from a local run."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from core_pipelines import basic

import interlock as il

PUBLIC = (
    "step", "pipeline", "when", "Resources", "Retry", "Backoff", "Cache", "CheckpointPolicy",
    "StepContext", "Dataset", "Model", "Metrics", "FailureKind", "classify", "run", "compile",
    "spec", "InterlockError", "PipelineDefinitionError", "ValidationFailed", "StepFailed",
)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_exists_and_is_exported(name: str) -> None:
    assert hasattr(il, name), f"il.{name} is missing"
    assert name in il.__all__


def test_error_hierarchy() -> None:
    for err in (il.PipelineDefinitionError, il.ValidationFailed, il.StepFailed):
        assert issubclass(err, il.InterlockError)
    assert issubclass(il.InterlockError, Exception)
    assert {k.value for k in il.FailureKind} == {"TRANSIENT", "CONTENTION", "FATAL", "PREEMPTED", "TIMEOUT"}


def test_run_signature_takes_backend_and_params() -> None:
    params = inspect.signature(il.run).parameters
    assert list(params)[:2] == ["pipeline", "backend"]
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def test_one_output(tmp_path: Path) -> None:
    result = il.run(basic.one_output, backend="local", workdir=tmp_path, x=21)
    assert result.status == "succeeded"
    assert result.outputs == {"o0": 42}
    assert result.steps["double"].status == "succeeded"
    assert result.receipt_path is not None and result.receipt_path.exists()


def test_tuple_output(tmp_path: Path) -> None:
    result = il.run(basic.tuple_output, backend="local", workdir=tmp_path, x=5)
    assert result.outputs == {"o0": 10, "o1": "n=10"}


def test_namedtuple_output(tmp_path: Path) -> None:
    spec = il.spec(basic.namedtuple_output)
    assert [name for name, _ in spec.outputs] == ["doubled", "text"]
    assert dict(spec.output_types)["doubled"].kind == "int"
    result = il.run(basic.namedtuple_output, backend="local", workdir=tmp_path, x=2, y=4)
    assert result.outputs == {"doubled": 12, "text": "2+4"}
    assert result["text"] == "2+4"


def test_returning_a_steps_namedtuple_names_the_outputs_by_field(tmp_path: Path) -> None:
    result = il.run(basic.step_namedtuple_output, backend="local", workdir=tmp_path)
    assert result.outputs == {"total": 9, "text": "3+6", "ratio": 0.5}


def test_default_parameters_are_used(tmp_path: Path) -> None:
    assert il.run(basic.one_output, backend="local", workdir=tmp_path).outputs == {"o0": 4}


def test_gate_condition_runs_before_a_block_that_reads_no_data(tmp_path: Path) -> None:
    # Regression: the topological order ignored il.when conditions, so a gated step with no
    # data inputs was ordered before its condition and the local run crashed with KeyError.
    spec = il.spec(basic.late_gate)
    order = [n.name for n in spec.nodes]
    assert order.index("is_positive") < order.index("announce")
    result = il.run(basic.late_gate, backend="local", workdir=tmp_path, x=1)
    assert result.steps["announce"].status == "succeeded"
    closed = il.run(basic.late_gate, backend="local", workdir=tmp_path, x=-1)
    assert closed.steps["announce"].status == "skipped"
    assert closed.outputs == {"o0": -4}


def test_pipeline_is_not_called_directly() -> None:
    with pytest.raises(il.PipelineDefinitionError, match="not called directly"):
        basic.one_output(x=1)


def test_step_called_outside_a_pipeline_runs_the_function() -> None:
    assert basic.double(x=4) == 8
    assert basic.stats(x=1, y=2) == basic.Stats(3, "1+2", 0.5)


def test_step_name_option(tmp_path: Path) -> None:
    # Regression: @il.step(name=...) raised TypeError (name passed twice to build_step_spec).
    @il.step(name="renamed", cache=il.Cache())
    def original(x: int) -> int:
        return x

    assert original.name == "renamed" and original.spec.name == "renamed"

    @il.pipeline(name="uses-renamed")
    def p(x: int = 1):
        return original(x=x)

    assert [n.name for n in il.spec(p).nodes] == ["renamed"]


def test_when_on_bool_fields_of_structured_outputs(tmp_path: Path) -> None:
    spec = il.spec(basic.field_gates)
    outer, inner = spec.gates
    assert outer.condition.describe() == "output judge.o0.ok"
    assert inner.condition.describe() == "output champion_gate.promote" and inner.parent == outer.id
    assert spec.node("announce").gate == inner.id

    opened = il.run(basic.field_gates, backend="local", workdir=tmp_path, x=5)
    assert {n: o.status for n, o in opened.steps.items()} == {
        "judge": "succeeded", "halve": "succeeded", "metrics_of": "succeeded",
        "champion_gate": "succeeded", "announce": "succeeded",
    }
    assert opened.outputs == {"o0": basic.Verdict(True, 0.5)}
    closed = il.run(basic.field_gates, backend="local", workdir=tmp_path, x=-5)
    assert [n for n, o in closed.steps.items() if o.status == "skipped"] == [
        "halve", "metrics_of", "champion_gate", "announce",
    ]


def test_when_on_a_non_bool_field() -> None:
    @il.pipeline(name="float-gate")
    def p():
        with il.when(basic.judge(x=1).score):
            basic.announce(msg="x")

    with pytest.raises(il.PipelineDefinitionError, match="il.when needs a bool, but output judge.o0.score is float"):
        il.spec(p)

    @il.pipeline(name="no-such-field")
    def q():
        with il.when(basic.judge(x=1).passed):
            basic.announce(msg="x")

    with pytest.raises(il.PipelineDefinitionError, match="of type Verdict has no field 'passed'"):
        il.spec(q)


def test_tuple_defaults_round_trip_and_run(tmp_path: Path) -> None:
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = il.spec(basic.tuple_defaults)
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert spec.params[0].default == [3, 4]
    assert il.run(basic.tuple_defaults, backend="local", workdir=tmp_path).outputs == {"o0": 7, "o1": 3}


def test_steps_defined_in_a_function_body_run_on_the_local_backend(tmp_path) -> None:
    @il.step
    def square(x: int) -> int:
        return x * x

    @il.pipeline(name="inline")
    def inline(x: int = 3):
        return square(x=x)

    assert "<locals>" in il.spec(inline).step("square").ref  # not importable: a container could not run it
    assert il.run(inline, backend="local", workdir=tmp_path).outputs["o0"] == 9
