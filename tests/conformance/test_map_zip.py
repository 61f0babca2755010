"""Maps over zipped lists (``il.map(step, over=il.zip(a=xs, b=ys))``): the same outputs and step
statuses on every backend that runs; the native construct in the compiled KFP and Flyte artifacts;
the mistakes refused while the pipeline is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from backends import backend_params

import interlock as il
from conformance import zip_pipelines as zp
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError
from interlock.core.dsl.pipeline import spec as spec_of

S, F, N = "succeeded", "failed", "not-run"


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> Any:
    return il.run(pipeline, backend=backend, workdir=tmp_path / "work", raise_on_failure=False, **params)


def _statuses(result: Any) -> dict[str, str]:
    return {k: str(v.status) for k, v in result.steps.items()}


@pytest.mark.parametrize("backend", backend_params("map.zip"))
def test_a_map_over_zipped_lists_pairs_the_elements_in_order(backend: str, tmp_path: Path) -> None:
    r = _run(zp.orders, backend, tmp_path)
    assert r.succeeded, r.error
    # 1*1.5+1, 2*2.0+1, 3*4.0+1: element i of each list, the broadcast step output to every item
    assert r.outputs["o1"] == [2.5, 5.0, 13.0] and [type(v) for v in r.outputs["o1"]] == [float] * 3
    assert r.outputs["o0"] == 20.5
    assert _statuses(r) == {"quantities": S, "shipping_fee": S, "line_total": S, "order_total": S}
    assert r.maps["line_total"].items == 3 and r.maps["line_total"].failed == []


@pytest.mark.parametrize("backend", backend_params("map.zip", "map.tolerate"))
def test_a_tolerant_zipped_map_reports_its_failed_items(backend: str, tmp_path: Path) -> None:
    r = _run(zp.orders_tolerant, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [1.0, None, 6.0, 2.0]
    assert r.maps["line_total"].items == 4 and r.maps["line_total"].failed == [1]


@pytest.mark.parametrize("backend", backend_params("map.zip"))
def test_zipped_lists_of_different_lengths_fail_the_map_before_any_item(backend: str, tmp_path: Path) -> None:
    r = _run(zp.orders, backend, tmp_path, prices=[1.0, 2.0])  # three quantities, two prices
    assert not r.succeeded
    assert _statuses(r) == {"quantities": S, "shipping_fee": S, "line_total": F, "order_total": N}
    assert r.error is not None and r.error.step == "line_total"
    assert "line_total" not in r.maps  # no item ran


def test_the_zipped_ports_are_in_the_spec_and_its_json() -> None:
    from interlock.core.backend.protocol import features_used
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = spec_of(zp.orders)
    m = spec.node("line_total").map
    assert m is not None and m.ports == ("quantity", "price")
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert "map.zip" in features_used(spec)


def test_every_backend_lists_how_it_renders_a_zipped_map() -> None:
    from interlock.core.backend.protocol import available_backends, get_backend

    for name in ("local", "flyte", "flyte-local", "kfp", "kfp-local"):
        if name in available_backends():
            assert get_backend(name).capabilities().features["map.zip"].startswith("native"), name


@pytest.mark.parametrize(("over", "match"), [
    ("one", "two lists or more"),
    ("item", "drop item="),
    ("broadcast", "both zipped and a broadcast"),
    ("type", "list\\[int\\]"),
    ("unknown", "is not an input"),
])
def test_a_wrong_zip_is_refused_while_the_pipeline_is_built(over: str, match: str) -> None:
    @il.pipeline(name="zip-bad")
    def bad(qs: list[int] = [1], ps: list[float] = [1.0], names: list[str] = ["a"]):  # noqa: B006
        if over == "one":
            return il.map(zp.line_total, over=il.zip(quantity=qs), price=1.0, shipping=0.0)
        if over == "item":
            return il.map(zp.line_total, over=il.zip(quantity=qs, price=ps), item="quantity", shipping=0.0)
        if over == "broadcast":
            return il.map(zp.line_total, over=il.zip(quantity=qs, price=ps), price=1.0, shipping=0.0)
        if over == "type":
            return il.map(zp.line_total, over=il.zip(quantity=names, price=ps), shipping=0.0)
        return il.map(zp.line_total, over=il.zip(quantity=qs, cost=ps), shipping=0.0)

    with pytest.raises(PipelineDefinitionError, match=match):
        spec_of(bad)


# -- compiled artifacts ---------------------------------------------------------------------
def test_kfp_zips_the_lists_in_the_enumerate_task_and_loops_over_its_records(tmp_path: Path) -> None:
    pytest.importorskip("kfp")
    import yaml
    from kfp import components

    path = il.compile(zp.orders, backend="kfp", out=tmp_path / "z.yaml")[0]
    assert components.load_component_from_file(str(path)).name == "zip-orders"  # kfp reads it back
    doc = next(yaml.safe_load_all(Path(path).read_text()))
    root = doc["root"]["dag"]["tasks"]
    enum = next(t for t in root.values() if t["taskInfo"]["name"] == "line_total-enumerate-items")
    params = enum["inputs"]["parameters"]
    assert set(params) == {"items", "z0"}
    assert params["items"]["taskOutputParameter"]["producerTask"] == "quantities"
    assert params["z0"]["componentInputParameter"] == "prices"
    loop = next(t for t in root.values() if t["taskInfo"]["name"] == "line_total-map")
    assert loop["parameterIterator"]["items"]["inputParameter"].endswith("enumerate-items-Output")
    # each iteration takes its record; the zipped input is no input of the component
    comp = doc["components"]["comp-line-total"]["inputDefinitions"]["parameters"]
    assert "quantity" in comp and "price" not in comp and "shipping" in comp


def test_flyte_maps_both_lists_in_one_array_node() -> None:
    pytest.importorskip("flytekit")
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    models = serialize(spec_of(zp.orders), project="p", domain="d", version="v1", image="img:1")
    (array,) = [n for m in models if isinstance(m, WorkflowSpec) for n in m.template.nodes if n.array_node is not None]
    bound = {b.var: b.binding for b in array.inputs}
    assert bound["quantity"].promise.node_id and bound["price"].promise.var == "prices"
    assert array.array_node.node.task_node is not None  # the per-item task inside
    # Flyte maps every input it does not bind: both lists, element i of each
    assert sorted(array.array_node.to_flyte_idl().bound_inputs) == ["note", "shipping"]
    assert sorted(bound) == ["note", "price", "quantity", "shipping"]


def test_a_map_over_a_sub_pipeline_is_refused_with_a_hint_that_works() -> None:
    # il.map over a sub-pipeline builds (issue 24: test_map_subpipeline.py runs it); a backend
    # that cannot render it refuses it at build time, with the chained maps as what works.
    from interlock.core.backend.protocol import check_capabilities, get_backend

    @il.pipeline(name="zip-map-sub")
    def mapped(xs: list[int] = [1, 2]):  # noqa: B006
        return il.map(zp.trial, over=xs)

    spec = spec_of(mapped)
    with pytest.raises(CapabilityError, match="map.subpipeline") as caught:
        check_capabilities(spec, get_backend("argo").capabilities())  # kfp and flyte render it now
    assert caught.value.hint is not None and "il.zip" in caught.value.hint
    spec_of(zp.body_chained)  # the hint's form builds (and runs: below)


@pytest.mark.parametrize("backend", backend_params("map.zip"))
def test_a_loop_body_of_several_steps_as_chained_maps(backend: str, tmp_path: Path) -> None:
    r = _run(zp.body_chained, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [5.0, 5.0, 3.75]


@pytest.mark.parametrize("backend", backend_params("map.zip", "subpipeline", "gates"))
def test_a_zipped_map_inside_a_sub_pipeline_and_a_branch(backend: str, tmp_path: Path) -> None:
    r = _run(zp.in_sub_and_branch, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs == {"o0": 10.0}  # 1*2.0+1 + 2*3.0+1
    assert r.maps["line_total"].items == 2 and r.maps["zip-in-sub.line_total"].items == 2
    assert set(_statuses(r).values()) == {S}
    r = _run(zp.in_sub_and_branch, backend, tmp_path / "closed", go=False)
    assert r.succeeded, r.error
    assert _statuses(r)["line_total"] == "skipped" and _statuses(r)["zip-in-sub.line_total"] == S


@pytest.mark.parametrize("backend", backend_params("map.zip"))
def test_a_zipped_list_holding_nones_gives_each_item_its_none(backend: str, tmp_path: Path) -> None:
    r = _run(zp.optional_lists, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [3, 2, 9]
