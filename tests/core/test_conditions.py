"""Build-time conditions (il.when expressions) and the errors for promises used as values."""

from __future__ import annotations

import pytest

import interlock as il
from interlock.core.model.pipeline_spec import PipelineSpec


@il.step
def count(n: int) -> int:
    return n


@il.step
def say(text: str) -> str:
    return text


def _build_error(body) -> il.PipelineDefinitionError:
    @il.pipeline(name="bad-text")
    def p(n: int = 1):
        body(count(n=n))

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.spec(p)
    return info.value


@pytest.mark.parametrize("use", [
    lambda c: say(text=f"heads and {c} > 5"),
    lambda c: say(text="%s" % c),  # noqa: UP031 - the point of the test
    lambda c: say(text="{}".format(c)),  # noqa: UP032
    lambda c: say(text="n=" + c),
    lambda c: say(text=str(c)),
    lambda c: bool(c),
    lambda c: [x for x in c],
    lambda c: len(c),
    lambda c: 3 in c,
    lambda c: say(text="x") if c else None,
    lambda c: [say.named(f"s{i}")(text="x") for i in range(c)],
])
def test_a_promise_used_as_a_value_is_refused_with_what_to_write(use) -> None:
    err = _build_error(use)
    assert err.pipeline == "bad-text" and err.step == "count"
    assert "has no value while the pipeline is being built" in str(err)
    assert err.hint


def test_a_plain_python_value_in_when_says_what_to_write() -> None:
    @il.pipeline(name="plain-when")
    def p(n: int = 1):
        flip = "heads"
        with il.when(flip == "heads"):
            say(text="x")

    with pytest.raises(il.PipelineDefinitionError, match="plain Python value") as info:
        il.spec(p)
    assert "flip_coin()" in (info.value.hint or "")


def test_comparisons_are_type_checked() -> None:
    @il.pipeline(name="bad-compare")
    def p(n: int = 1):
        with il.when(count(n=n) == "five"):
            say(text="x")

    with pytest.raises(il.PipelineDefinitionError, match="cannot compare output count.o0"):
        il.spec(p)

    @il.pipeline(name="bad-order")
    def q(label: str = "a"):
        with il.when(say(text=label) > "b"):
            say.named("inner")(text="x")

    with pytest.raises(il.PipelineDefinitionError, match="needs numbers"):
        il.spec(q)


def test_and_or_not_build_an_expression_that_round_trips_through_json() -> None:
    @il.pipeline(name="expr")
    def p(n: int = 1, go: bool = True, label: str = "heads"):
        c = count(n=n)
        with il.when(((5 < c) & (say(text=label) == "heads")) | ~go):
            say.named("inner")(text="x")

    spec = il.spec(p)
    [gate] = spec.gates
    assert gate.expr.describe() == "(((count.o0 > 5) & (say.o0 == 'heads')) | ~(go))"
    assert PipelineSpec.loads(spec.dumps()) == spec
    old_style = PipelineSpec.loads(spec.dumps())
    assert old_style.to_json()["gates"][0]["expr"]["op"] == "or"


def test_python_and_or_not_on_conditions_are_refused() -> None:
    @il.pipeline(name="py-and")
    def p(n: int = 1):
        c = count(n=n)
        with il.when((c > 1) and (c < 5)):
            say(text="x")

    with pytest.raises(il.PipelineDefinitionError, match="not `and`, `or`, `not`"):
        il.spec(p)


def test_a_loop_over_a_runtime_value_points_to_map_and_branches() -> None:
    """No dynamic graphs (Flyte @dynamic): the refusal says what to use instead."""
    err = _build_error(lambda c: [say(text="x") for _ in range(c)])
    assert "il.map" in (err.hint or "") and "il.when" in (err.hint or "")
    err = _build_error(lambda c: [say(text="x") for _ in c])
    assert "il.map" in (err.hint or "")
