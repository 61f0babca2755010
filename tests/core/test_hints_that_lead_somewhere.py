"""Refusals name the author's construct and hint at something that works (issue 24, item 10):
each test follows the hint and checks that the result is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

import interlock as il


@il.step
def count() -> int:
    return 3


@il.step
def show(x: int) -> int:
    return x


@il.step
def names() -> list:  # type: ignore[type-arg]
    return ["a"]


@il.step
def typed_names() -> list[str]:
    return ["a"]


@il.step
def join(xs: list[str]) -> str:
    return ",".join(xs)


def test_a_disjunction_refused_by_kfp_names_the_when_line_and_the_hint_works(tmp_path: Path) -> None:
    pytest.importorskip("kfp")

    @il.pipeline(name="negated-and")
    def negated_and():
        n = count()
        with il.when(~((n > 1) & (n < 5))):
            show(x=n)

    with pytest.raises(il.CapabilityError) as info:
        il.compile(negated_and, backend="kfp", out=tmp_path / "a")
    err = info.value
    line = Path(__file__).name + ":"
    assert "il.when(" in str(err) and line in str(err) and "gate-" not in str(err), str(err)
    assert err.step is None and "its own block" in (err.hint or "")

    @il.pipeline(name="two-blocks")  # what the hint says: one block per alternative
    def two_blocks():
        n = count()
        with il.when(n <= 1):
            show.named("low")(x=n)
        with il.when(n >= 5):
            show.named("high")(x=n)

    assert il.compile(two_blocks, backend="kfp", out=tmp_path / "b")
    assert il.run(two_blocks, backend="local", workdir=tmp_path / "w").steps["low"].status == "skipped"


def test_a_constant_condition_in_a_sub_pipeline_points_to_a_parameter_and_that_works(tmp_path: Path) -> None:
    @il.pipeline(name="maybe-show")
    def maybe_show(flag: bool = True, x: int = 1):
        with il.when(flag):
            show(x=x)

    with pytest.raises(il.PipelineDefinitionError) as info:
        @il.pipeline(name="fixed-flag")
        def fixed_flag(x: int = 1):
            maybe_show(flag=True, x=x)

        il.spec(fixed_flag)
    hint = info.value.hint or ""
    assert "parameter of the calling pipeline" in hint and "Python `if`" not in hint

    @il.pipeline(name="passed-flag")  # what the hint says
    def passed_flag(x: int = 1, flag: bool = True):
        maybe_show(flag=flag, x=x)

    result = il.run(passed_flag, backend="local", workdir=tmp_path)
    assert result.steps["maybe-show.show"].status == "succeeded"


def test_an_untyped_list_into_a_typed_one_says_to_annotate_and_that_works() -> None:
    with pytest.raises(il.PipelineDefinitionError) as info:
        @il.pipeline(name="untyped-list")
        def untyped_list():
            return join(xs=names())

        il.spec(untyped_list)
    assert info.value.hint == "annotate the return type of step 'names' as list[str] (an untyped list may hold anything)"

    @il.pipeline(name="typed-list")
    def typed_list():
        return join(xs=typed_names())

    assert il.spec(typed_list)
