"""Build-time validation: every wiring mistake fails before anything runs, naming where.

Nothing here executes a step: building a pipeline's spec only records a graph. Each error
must name the pipeline, the step, the port and (for type errors) both types.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import pytest

import interlock as il
from interlock.core.base.errors import PolicyError
from interlock.core.model.graph import validate
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import Binding


# -- steps used by the pipelines below (never run) ------------------------------------------------
@il.step
def count(n: int = 3) -> int:
    return n


@il.step
def maybe_count(n: int = 3) -> Optional[int]:  # noqa: UP045 - the spelling under test
    return n or None


@il.step
def shout(msg: str) -> str:
    return msg.upper()


@il.step
def halve(x: float) -> float:
    return x / 2


@il.step
def take_int(x: int) -> int:
    return x


@il.step
def take_optional(x: Optional[int] = None) -> int:  # noqa: UP045
    return x or 0


@il.step
def deploy(model: il.Model) -> str:
    return str(model.path)


@il.step
def flag(x: int) -> bool:
    return x > 0


def where(exc: il.PipelineDefinitionError) -> tuple[str | None, str | None, str | None]:
    return exc.pipeline, exc.step, exc.port


# -- wiring mistakes: each names the pipeline, the step, the port and what is wrong ---------------
def _int_into_str():
    shout(msg=count())


def _optional_into_int():
    take_int(x=maybe_count())


def _param_mismatch(name: str = "x"):
    take_int(x=name)


def _const_mismatch():
    take_int(x="seven")


def _missing_input():
    shout()


def _unknown_arg():
    shout(msg="a", volume=11)


@pytest.mark.parametrize(
    ("body", "step", "port", "needles"),
    [
        pytest.param(_int_into_str, "shout", "msg",
                     ["pipeline 'int-into-str'", "step 'shout'", "port 'msg'", "output count.o0 is int", "expects str"],
                     id="int-into-str"),
        pytest.param(_optional_into_int, "take_int", "x", ["Optional[int]", "expects int"], id="optional-into-int"),
        pytest.param(_param_mismatch, "take_int", "x", ["pipeline parameter 'name' is str"], id="param-mismatch"),
        pytest.param(_const_mismatch, "take_int", "x", ["'seven' (str) does not fit int"], id="const-mismatch"),
        pytest.param(_missing_input, "shout", "msg", ["missing required input of type str"], id="missing-input"),
        pytest.param(_unknown_arg, "shout", "volume", ["['msg']"], id="unknown-arg"),
    ],
)
def test_wiring_mistake_names_pipeline_step_port_and_why(
    body: Any, step: str, port: str, needles: list[str], request: pytest.FixtureRequest
) -> None:
    name = request.node.callspec.id
    with pytest.raises(il.PipelineDefinitionError) as info:  # a module-level body: built as it is decorated
        il.spec(il.pipeline(name=name)(body))
    assert where(info.value) == (name, step, port)
    for needle in needles:
        assert needle in str(info.value)


def test_dataframe_into_model() -> None:
    pd = pytest.importorskip("pandas")

    def make() -> Any:
        return pd.DataFrame({"a": [1]})

    make.__annotations__ = {"return": pd.DataFrame}  # pandas is imported here, not at module level
    frame = il.step(name="frame")(make)

    @il.pipeline(name="frame-into-model")
    def p():
        deploy(model=frame())

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(p)
    assert where(info.value) == ("frame-into-model", "deploy", "model")
    assert "pandas.DataFrame" in str(info.value) and "il.Model" in str(info.value)


def test_int_into_optional_int_and_int_into_float_are_accepted() -> None:
    @il.pipeline(name="widening")
    def p():
        c = count()
        take_optional(x=c)
        return halve(x=c)

    spec = il.spec(p)
    assert {n.name for n in spec.nodes} == {"count", "take_optional", "halve"}
    assert spec.node("halve").bindings["x"] == Binding.of_output("count", "o0")


# -- missing and unknown arguments -------------------------------------------------------------
def test_positional_arguments_inside_a_pipeline() -> None:
    @il.pipeline(name="positional")
    def p():
        shout("a")

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(p)
    assert where(info.value)[:2] == ("positional", "shout")
    assert "by keyword" in str(info.value)
    assert info.value.hint == "shout(msg=...)"


# -- promises outside their pipeline ---------------------------------------------------------------
def test_step_output_used_in_another_pipeline() -> None:
    leaked: list[Any] = []

    @il.pipeline(name="producer")
    def a():
        c = count()
        leaked.append(c)
        return c

    @il.pipeline(name="consumer")
    def b():
        return take_int(x=leaked[0])

    il.spec(a)
    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(b)
    assert where(info.value) == ("consumer", "take_int", "x")
    assert "belongs to pipeline 'producer'" in str(info.value)


def test_calling_a_step_directly_with_a_promise() -> None:
    leaked: list[Any] = []

    @il.pipeline(name="leaky")
    def a():
        leaked.append(count())

    il.spec(a)
    calls: list[int] = []

    @il.step
    def record(x: int) -> int:
        calls.append(x)
        return x

    with pytest.raises(il.PipelineDefinitionError) as info:
        record(x=leaked[0])
    assert info.value.step == "record"
    assert "output count.o0 used outside its pipeline" in str(info.value)
    assert calls == []


def test_returning_a_promise_of_another_pipeline() -> None:
    leaked: list[Any] = []

    @il.pipeline(name="first")
    def a():
        leaked.append(count())

    @il.pipeline(name="second")
    def b():
        count()
        return leaked[0]

    il.spec(a)
    with pytest.raises(il.PipelineDefinitionError, match="pipeline 'second'.*must be an output of a step of this pipeline"):
        il.spec(b)


# -- cycles and duplicate names (hand-edited specs; the builder cannot make them) ----------------
@il.pipeline(name="chain")
def chain(x: int = 1):
    a = take_int(x=x)
    b = take_int.named("b")(x=a)
    return take_int.named("c")(x=b)


def _rebind(spec: PipelineSpec, node: str, port: str, binding: Binding) -> PipelineSpec:
    nodes = tuple(
        dataclasses.replace(n, inputs=tuple((k, binding if k == port else b) for k, b in n.inputs))
        if n.name == node else n
        for n in spec.nodes
    )
    return dataclasses.replace(spec, nodes=nodes)


def test_cycle_in_an_edited_spec_names_its_members() -> None:
    spec = il.spec(chain)
    cyclic = _rebind(spec, "take_int", "x", Binding.of_output("c", "o0"))
    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(cyclic)
    assert info.value.pipeline == "chain"
    assert "cycle between steps ['b', 'c', 'take_int']" in str(info.value)
    # The same check runs on a spec read back from JSON.
    with pytest.raises(il.PipelineDefinitionError, match="cycle"):
        validate(PipelineSpec.loads(cyclic.dumps()))


def test_self_loop_through_after() -> None:
    spec = il.spec(chain)
    looped = dataclasses.replace(
        spec, nodes=tuple(dataclasses.replace(n, after=("b",)) if n.name == "b" else n for n in spec.nodes)
    )
    with pytest.raises(il.PipelineDefinitionError, match=r"cycle between steps \['b', 'c'\]"):
        validate(looped)


def test_duplicate_node_names_in_an_edited_spec() -> None:
    spec = il.spec(chain)
    dup = dataclasses.replace(spec, nodes=(*spec.nodes, dataclasses.replace(spec.nodes[1])))
    with pytest.raises(il.PipelineDefinitionError) as info:
        validate(dup)
    assert info.value.step == "b" and "duplicate node name" in str(info.value)


def test_duplicate_node_name_from_the_builder() -> None:
    @il.pipeline(name="dup-builder")
    def p():
        take_int.named("same")(x=1)
        take_int.named("same")(x=2)

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(p)
    assert where(info.value)[:2] == ("dup-builder", "same")
    assert "duplicate node name" in str(info.value)


def test_edited_spec_with_a_type_mismatch_or_unknown_node() -> None:
    spec = il.spec(chain)
    with pytest.raises(il.PipelineDefinitionError, match="reads unknown node 'ghost'"):
        validate(_rebind(spec, "b", "x", Binding.of_output("ghost", "o0")))
    with pytest.raises(il.PipelineDefinitionError, match="output take_int.nope does not exist"):
        validate(_rebind(spec, "b", "x", Binding.of_output("take_int", "nope")))


def test_calling_a_step_twice_gets_fresh_node_names() -> None:
    @il.pipeline(name="twice")
    def p():
        return take_int(x=take_int(x=1))

    assert [n.name for n in il.spec(p).nodes] == ["take_int", "take_int-2"]


# -- resources and retry policies ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"memory": "2Gx"}, "memory='2Gx' is not a valid Kubernetes quantity"),
        ({"cpu": -1}, "cpu=-1 must not be negative"),
        ({"cpu": "-1"}, "cpu='-1' is not a valid Kubernetes quantity"),
        ({"accelerator": "nvidia-h200"}, "accelerator='nvidia-h200' without a gpu count"),
        ({"gpu": 1.5}, "gpu=1.5 must be a whole number"),
        ({"gpu": "2"}, "gpu='2' must be a whole number"),
        ({"gpu": -1}, "gpu=-1 must not be negative"),
        ({"shared_memory": "lots"}, "shared_memory='lots'"),
        ({"memory": "4Gi", "memory_limit": "2Gi"}, "memory_limit='2Gi' is below the request"),
    ],
)
def test_invalid_resources(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(PolicyError) as info:
        il.Resources(**kwargs)
    assert isinstance(info.value, il.PipelineDefinitionError)
    assert needle in str(info.value)


def test_accelerator_hint_shows_the_fix() -> None:
    with pytest.raises(PolicyError) as info:
        il.Resources(accelerator="nvidia-h200")
    assert info.value.hint == "add gpu=1 (or more): Resources(gpu=1, accelerator='nvidia-h200')"


def test_valid_resources_are_kept_as_strings() -> None:
    r = il.Resources(cpu=2, memory="512Mi", gpu=2, accelerator="nvidia-h200", shared_memory="1Gi")
    assert r.cpu == "2" and r.memory == "512Mi" and r.gpu == 2


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: il.Retry(transient=-1), "Retry transient=-1"),
        (lambda: il.Retry(transient=1.5), "Retry transient=1.5 must be a whole number"),
        (lambda: il.Retry(transient=True), "Retry transient=True"),
        (lambda: il.Retry(preempted=-2), "Retry preempted=-2"),
        (lambda: il.Retry(contention="lots"), "Retry contention='lots'"),
        (lambda: il.Retry(oom_remediation="yes"), "oom_remediation='yes'"),
        (lambda: il.Backoff(first="0s"), "first='0s' must be longer than 0s"),
        (lambda: il.Backoff(factor=0.5), "factor=0.5 must be a finite number >= 1"),
        (lambda: il.Backoff(first="10m", max_delay="1m"), "max_delay='1m' is shorter than first='10m'"),
        (lambda: il.Backoff(first="10m", max_total="1m"), "max_total='1m' is shorter than first='10m'"),
        (lambda: il.Backoff(attempts=-1), "Backoff attempts=-1"),
        (lambda: il.Backoff(first="soon"), "soon"),
    ],
)
def test_invalid_retry_settings(make: Any, needle: str) -> None:
    with pytest.raises(PolicyError) as info:
        make()
    assert needle in str(info.value)


def test_invalid_policy_on_a_step_names_the_step() -> None:
    with pytest.raises(PolicyError) as info:
        @il.step(retry="twice")
        def bad(x: int) -> int:
            return x

    assert info.value.step == "bad"
    assert "must be il.Retry" in str(info.value)
    with pytest.raises(PolicyError, match="step 'slow': duration -5 is negative"):
        @il.step(timeout=-5)
        def slow(x: int) -> int:
            return x
    with pytest.raises(PolicyError, match="unknown step option"):
        il.step(retries=3)


# -- gates -------------------------------------------------------------------------------------
def test_when_on_a_non_bool_output() -> None:
    @il.pipeline(name="when-int")
    def p():
        with il.when(count()):
            shout(msg="x")

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(p)
    assert info.value.pipeline == "when-int"
    assert "il.when needs a bool, but output count.o0 is int" in str(info.value)


def test_when_on_a_parameter_or_a_constant() -> None:
    # Issue 10: a bool parameter decides a block directly (it is known only at run time).
    @il.pipeline(name="when-param")
    def p(go: bool = True):
        with il.when(go):
            shout(msg="x")

    [gate] = il.spec(p).gates
    assert gate.expr is not None and gate.expr.describe() == "go"

    # A plain Python value is known at build time: refused, saying what to write instead.
    @il.pipeline(name="when-const")
    def q():
        with il.when(True):
            shout(msg="x")

    with pytest.raises(il.PipelineDefinitionError, match="plain Python value") as info:
        il.spec(q)
    assert "il.when(flip == " in (info.value.hint or "")


def test_when_outside_a_pipeline() -> None:
    with pytest.raises(il.PipelineDefinitionError, match="only meaningful inside an @il.pipeline"):
        il.when(True)


def test_promise_used_as_a_python_bool() -> None:
    @il.pipeline(name="if-promise")
    def p():
        if flag(x=1):
            shout(msg="x")

    with pytest.raises(il.PipelineDefinitionError, match="has no value while the pipeline is being built"):
        il.spec(p)


def test_output_of_a_gated_step_used_outside_the_block() -> None:
    @il.pipeline(name="gate-leak")
    def p():
        ok = flag(x=1)
        with il.when(ok):
            c = count()
        take_int(x=c)

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(p)
    assert where(info.value) == ("gate-leak", "take_int", "x")
    assert "inside an il.when block" in str(info.value)


def test_returning_a_gated_output() -> None:
    @il.pipeline(name="gate-return")
    def p():
        with il.when(flag(x=1)):
            c = count()
        return c

    with pytest.raises(il.PipelineDefinitionError, match="pipeline output 'o0' comes from output count.o0, inside an il.when"):
        il.spec(p)


def test_gated_output_used_inside_the_same_block_is_fine() -> None:
    @il.pipeline(name="gate-ok")
    def p():
        with il.when(flag(x=1)):
            take_int(x=count())

    spec = il.spec(p)
    assert spec.node("take_int").gate == spec.node("count").gate == "gate-1"


def test_empty_when_block() -> None:
    @il.pipeline(name="gate-empty")
    def p():
        with il.when(flag(x=1)):
            pass

    with pytest.raises(il.PipelineDefinitionError, match="block has no steps"):
        il.spec(p)


# -- unsupported types ---------------------------------------------------------------------------
class Thing:
    pass


def test_plain_class_input_is_refused_with_a_hint() -> None:
    with pytest.raises(il.PipelineDefinitionError) as info:
        @il.step
        def use(thing: Thing) -> int:
            return 1

    exc = info.value
    assert exc.step == "use"
    assert "unsupported type" in str(exc) and "Thing" in str(exc) and "input 'thing'" in str(exc)
    assert exc.hint is not None and "pickle" in exc.hint and "dataclasses" in exc.hint


def test_plain_class_output_and_unions_are_refused() -> None:
    with pytest.raises(il.PipelineDefinitionError, match="unsupported type.*Thing"):
        @il.step
        def make() -> Thing:
            return Thing()

    with pytest.raises(il.PipelineDefinitionError, match="only Optional"):
        @il.step
        def either(x: int | str) -> int:
            return 1

    with pytest.raises(il.PipelineDefinitionError, match="dict keys must be str"):
        @il.step
        def keyed(x: dict[int, int]) -> int:
            return 1


def test_missing_annotations() -> None:
    with pytest.raises(il.PipelineDefinitionError) as info:
        @il.step
        def untyped(x) -> int:  # type: ignore[no-untyped-def]
            return 1
    assert (info.value.step, info.value.port) == ("untyped", "x")
    with pytest.raises(il.PipelineDefinitionError, match="missing return annotation"):
        @il.step
        def no_return(x: int):  # type: ignore[no-untyped-def]
            return 1


def test_pipeline_parameter_of_an_artifact_type() -> None:
    @il.pipeline(name="artifact-param")
    def p(model: il.Model):
        deploy(model=model)

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(p)
    assert (info.value.pipeline, info.value.port) == ("artifact-param", "model")


def test_bad_default_values() -> None:
    with pytest.raises(il.PipelineDefinitionError, match="default 'three' does not match the declared type int"):
        @il.step
        def d(x: int = "three") -> int:  # type: ignore[assignment]
            return x

    @il.pipeline(name="bad-default")
    def p(x: int = "three"):  # type: ignore[assignment]
        take_int(x=x)

    with pytest.raises(il.PipelineDefinitionError, match="default 'three' does not match int"):
        il.spec(p)


def test_bad_pipeline_name() -> None:
    # Underscores and capitals name pipelines as Airflow and Flyte do (issue 31, item 8:
    # tests/conformance/test_names.py); a '.' is a Flyte name separator.
    with pytest.raises(il.PipelineDefinitionError, match="invalid pipeline name 'fraud.retrain': it contains '.'"):
        il.pipeline(name="fraud.retrain")(lambda: None)


def test_nothing_runs_while_building() -> None:
    calls: list[int] = []

    @il.step
    def side_effect(x: int) -> int:
        calls.append(x)
        return x

    @il.pipeline(name="no-side-effects")
    def p(x: int = 1):
        return side_effect(x=side_effect(x=x))

    spec = il.spec(p)
    assert len(spec.nodes) == 2
    assert calls == []


def test_promise_nested_in_a_constant_is_refused() -> None:
    @il.step
    def count(xs: list) -> int:
        return len(xs)

    @il.step
    def same(x: int) -> int:
        return x

    @il.pipeline
    def nested(a: int = 1):
        return count(xs=[same(x=a), 2])

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(nested)
    assert info.value.step == "count" and info.value.port == "xs"
    assert "nested inside a list or dict constant" in str(info.value)


def test_run_ids_are_valid_flyte_execution_names() -> None:
    import re

    from interlock.core.backend.protocol import new_run_id

    ids = {new_run_id("any") for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"[a-z][a-z0-9-]{0,19}", i) for i in ids), ids
