"""The fan-out / fan-in model: MapSpec, list bindings, the list-of-artifacts kind, and the
local backend's item execution (bounded concurrency, fail fast, per-item cache and names)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import NamedTuple

import pytest

import interlock as il
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.fanout import map as il_map
from interlock.core.dsl.pipeline import spec as spec_of
from interlock.core.model.codecs import TypeKind
from interlock.core.model.fanout import MapSpec, item_node
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.types import type_of


@pytest.mark.parametrize(("tolerate", "n", "allowed"), [(0, 10, 0), (2, 10, 2), (0.25, 8, 2), (0.1, 8, 0), (0.5, 3, 1)])
def test_allowed_failures(tolerate: float, n: int, allowed: int) -> None:
    assert MapSpec("x", tolerate=tolerate).allowed_failures(n) == allowed


def test_a_fraction_is_flytes_min_success_ratio_and_a_count_is_not() -> None:
    assert MapSpec("x", tolerate=0.25).min_success_ratio() == 0.75
    assert MapSpec("x", tolerate=2).min_success_ratio() is None
    assert MapSpec("x").min_success_ratio() is None


@pytest.mark.parametrize("concurrency", [0, -1, 1.5])
def test_a_bad_concurrency_is_refused(concurrency: object) -> None:
    with pytest.raises(PipelineDefinitionError, match="concurrency"):
        MapSpec("x", concurrency=concurrency)  # type: ignore[arg-type]


def test_a_list_of_artifacts_is_its_own_kind() -> None:
    assert type_of(list[il.Dataset]).kind is TypeKind.ARTIFACTS
    assert type_of(list[il.Dataset]).describe() == "list[il.Dataset]"
    assert type_of(list[int]).kind is TypeKind.LIST
    assert type_of(list[il.Model] | None).optional


def test_item_nodes_carry_the_index() -> None:
    assert item_node("train", 3) == "train[3]"


@il.step
def inc(x: int) -> int:
    return x + 1


@il.step
def slow(x: int) -> int:
    global _running, _peak
    with _lock:
        _running += 1
        _peak = max(_peak, _running)
    time.sleep(0.05)
    with _lock:
        _running -= 1
    return x


_lock = threading.Lock()
_running = 0
_peak = 0


@il.step
def add(parts: list[float]) -> float:
    return sum(parts)


@il.step(cache=il.Cache(version="1"))
def cached_inc(x: int) -> int:
    _calls.append(x)
    return x + 1


_calls: list[int] = []


def test_a_list_of_outputs_records_a_list_binding_with_int_widened_to_float() -> None:
    @il.pipeline(name="fan-in-widen")
    def widen(x: int = 1):
        return add(parts=[inc(x=x), 2.5])

    spec = spec_of(widen)
    b = spec.node("add").bindings["parts"]
    assert b.kind is BindingKind.LIST
    assert [i.kind for i in b.items] == [BindingKind.OUTPUT, BindingKind.CONST]
    assert spec.node("add").upstream() == {"inc"}
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert Binding.from_json(b.to_json()) == b


def test_a_list_element_of_the_wrong_type_names_its_index() -> None:
    @il.step
    def word(x: int) -> str:
        return str(x)

    @il.pipeline(name="fan-in-bad")
    def bad(x: int = 1):
        return add(parts=[inc(x=x), word(x=x)])

    with pytest.raises(PipelineDefinitionError, match=r"element \[1\]"):
        spec_of(bad)


def test_a_tolerant_map_cannot_feed_a_list_of_non_optional_elements() -> None:
    @il.step
    def total(parts: list[int]) -> int:
        return sum(parts)

    @il.pipeline(name="fan-opt")
    def opt(xs: list[int] = [1]):  # noqa: B006
        return total(parts=il_map(inc, over=xs, tolerate=0.5))

    with pytest.raises(PipelineDefinitionError, match="Optional"):
        spec_of(opt)


def test_a_map_outside_a_pipeline_is_refused() -> None:
    with pytest.raises(PipelineDefinitionError, match="inside an @il.pipeline"):
        il_map(inc, over=[1])


class Two(NamedTuple):
    a: int
    b: int


def test_a_multi_output_step_cannot_be_mapped() -> None:
    @il.step
    def two(x: int) -> Two:
        return Two(x, x)

    @il.pipeline(name="fan-two")
    def p(xs: list[int] = [1]):  # noqa: B006
        return il_map(two, over=xs).a

    with pytest.raises(PipelineDefinitionError, match="single-output"):
        spec_of(p)


def test_local_runs_at_most_concurrency_items_at_once(tmp_path: Path) -> None:
    global _peak
    _peak = 0

    @il.pipeline(name="fan-conc")
    def conc(xs: list[int] = list(range(8))):  # noqa: B006, B008
        return il_map(slow, over=xs, concurrency=3)

    r = il.run(conc, backend="local", workdir=tmp_path)
    assert r.outputs["o0"] == list(range(8))
    assert 1 < _peak <= 3


def test_local_caches_each_item_by_its_own_inputs(tmp_path: Path) -> None:
    @il.pipeline(name="fan-cache")
    def cached(xs: list[int] = [1, 2]):  # noqa: B006
        return il_map(cached_inc, over=xs)

    _calls.clear()
    first = il.run(cached, backend="local", workdir=tmp_path, xs=[1, 2])
    second = il.run(cached, backend="local", workdir=tmp_path, xs=[2, 3])
    assert first.outputs["o0"] == [2, 3] and second.outputs["o0"] == [3, 4]
    assert sorted(_calls) == [1, 2, 3]  # item 2 came from the cache in the second run
    assert second.maps["cached_inc"].cached == [0]


def test_a_failed_item_does_not_stop_its_siblings(tmp_path: Path) -> None:
    """Every item runs, then the map fails: the same items on every backend (conformance:
    test_a_failed_map_reports_the_same_items_attempts_and_name_everywhere)."""
    started: list[int] = []

    @il.step
    def first_fails(x: int) -> int:
        started.append(x)
        if x == 0:
            raise ValueError("bad config")
        return x

    @il.pipeline(name="fan-fast")
    def fast(xs: list[int] = list(range(5))):  # noqa: B006, B008
        return il_map(first_fails, over=xs, concurrency=1)

    r = il.run(fast, backend="local", workdir=tmp_path, raise_on_failure=False)
    assert str(r.status) == "failed" and started == [0, 1, 2, 3, 4]
    assert r.maps["first_fails"].failed == [0] and r.maps["first_fails"].items == 5
