"""``il.map`` over a sub-pipeline (issue 24, item 6): the body once per item with fan-in of its
outputs, the same outputs, step statuses and map reports on every backend that runs it; a
branch, a step map, a mapped sub-pipeline and a plain call inside the body; the mistakes refused
while the pipeline is built, and the backends that cannot render it refusing at build time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from backends import backend_params

import interlock as il
from conformance import submap_pipelines as sp
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError
from interlock.core.dsl.pipeline import spec as spec_of

S, F, N, C = "succeeded", "failed", "not-run", "cached"


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> Any:
    return il.run(pipeline, backend=backend, workdir=tmp_path / "work", raise_on_failure=False, **params)


def _statuses(result: Any) -> dict[str, str]:
    return {k: str(v.status) for k, v in result.steps.items()}


def _map(result: Any, call: str) -> dict[str, Any]:
    r = result.maps[call]
    return {"items": r.items, "failed": r.failed, "allowed": r.allowed_failures}


@pytest.mark.parametrize("backend", backend_params("map.subpipeline"))
def test_a_mapped_sub_pipeline_runs_its_body_per_item_and_gathers_each_output(backend: str, tmp_path: Path) -> None:
    r = _run(sp.sweep, backend, tmp_path)
    assert r.succeeded, r.error
    # lr 0.5, 1.0, 1.5 over "abcd": fit = 4 * lr, score = fit + 1, in item order
    assert r.outputs == {"o0": 7.0, "o1": [3.0, 5.0, 7.0]}
    assert _statuses(r) == {"make_lrs": S, "trial.fit": S, "trial.score": S, "best": S}
    assert _map(r, "trial") == {"items": 3, "failed": [], "allowed": 0}
    assert r.steps["trial.fit"].attempts == 3  # one attempt per item


@pytest.mark.parametrize("backend", backend_params("map.subpipeline"))
def test_an_empty_list_runs_no_item_and_gathers_empty_lists(backend: str, tmp_path: Path) -> None:
    r = _run(sp.sweep, backend, tmp_path, n=0)
    assert not r.succeeded  # max() of no scores: the reader fails, the map itself succeeded
    assert r.maps["trial"].items == 0
    assert _statuses(r)["trial.fit"] == S and _statuses(r)["best"] == F


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.tolerate", "map.subpipeline.tolerate"))
def test_a_tolerant_map_of_a_sub_pipeline_reports_its_failed_item(backend: str, tmp_path: Path) -> None:
    r = _run(sp.sweep_tolerant, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [3.0, None, 5.0, 2.0]  # None where the item's body failed
    assert _map(r, "trial") == {"items": 4, "failed": [1], "allowed": 1}
    assert _statuses(r) == {"trial.fit": S, "trial.score": S, "kept": S}


@pytest.mark.parametrize("backend", backend_params("map.subpipeline"))
def test_a_failed_item_fails_the_call_after_every_item_ran(backend: str, tmp_path: Path) -> None:
    r = _run(sp.sweep_strict, backend, tmp_path)
    assert not r.succeeded
    assert r.error is not None and r.error.step == "trial.fit"  # named as the body step, as a map is
    assert "negative" in str(r.error)
    assert _statuses(r) == {"trial.fit": F, "trial.score": S, "best": N}
    assert _map(r, "trial") == {"items": 3, "failed": [1], "allowed": 0}
    assert r.steps["trial.score"].attempts == 2  # items 0 and 2: the failed item's score never ran


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "branch.value"))
def test_a_branch_inside_the_body_is_decided_per_item(backend: str, tmp_path: Path) -> None:
    r = _run(sp.sweep_branch, backend, tmp_path)
    assert r.succeeded, r.error
    # scores 3, 5, 9: the first item takes the otherwise block, the others the il.when block
    assert r.outputs["o0"] == "low:3:3,high:5:5,high:9:9"  # final labels the branch's label
    assert _statuses(r) == {"judge.fit": S, "judge.score": S, "judge.high": S, "judge.low": S,
                            "judge.final": S, "joined": S}
    assert r.steps["judge.high"].attempts == 2 and r.steps["judge.low"].attempts == 1


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.subpipeline.nested"))
def test_a_step_map_inside_a_mapped_sub_pipeline(backend: str, tmp_path: Path) -> None:
    r = _run(sp.grid, backend, tmp_path)
    assert r.succeeded, r.error
    # rows 1..3, two cells each (10r, 10r+1), squared and summed per row, then over the rows
    assert r.outputs["o0"] == sum(x * x for row in (1, 2, 3) for x in (10 * row, 10 * row + 1))
    assert _statuses(r) == {"grid-row.cells": S, "grid-row.square": S, "grid-row.row_sum": S, "grand_total": S}
    assert r.steps["grid-row.square"].attempts == 6  # two items in each of three


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.subpipeline.nested"))
def test_a_mapped_sub_pipeline_inside_a_mapped_sub_pipeline(backend: str, tmp_path: Path) -> None:
    r = _run(sp.nested, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [2, 102, 4, 104]  # a + (a, a + 100) for a in 1, 2
    assert _statuses(r) == {"outer-pair.offsets": S, "outer-pair.inner-pair.add": S, "flat": S}
    assert r.steps["outer-pair.inner-pair.add"].attempts == 4
    assert _map(r, "outer-pair") == {"items": 2, "failed": [], "allowed": 0}


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.zip"))
def test_a_zipped_map_of_a_sub_pipeline_that_calls_another(backend: str, tmp_path: Path) -> None:
    r = _run(sp.sweep_zip, backend, tmp_path)
    assert r.succeeded, r.error
    # (1.0, "a"): 1*1+1 + 1 = 3; (2.0, "abc"): 2*3+1 + 2 = 9
    assert r.outputs["o0"] == 9.0
    assert _statuses(r) == {"prep-score.trial.fit": S, "prep-score.trial.score": S, "prep-score.score": S, "best": S}


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.tolerate", "map.subpipeline.tolerate", "cache"))
def test_a_rerun_hits_the_cache_per_item_and_reruns_the_failed_one(backend: str, tmp_path: Path) -> None:
    first = _run(sp.sweep_cached, backend, tmp_path)
    assert first.succeeded and first.maps["cached-trial"].failed == [1]
    again = _run(sp.sweep_cached, backend, tmp_path)
    assert again.succeeded, again.error
    assert again.outputs == first.outputs == {"o0": [3.0, None, 5.0]}
    # Items 0 and 2 hit the cache; item 1 failed, so it wrote no entry and runs again: the body
    # step is never a whole-node cache hit.
    assert _statuses(again)["cached-trial.cached_fit"] == S
    assert again.maps["cached-trial"].failed == [1]


# -- the spec --------------------------------------------------------------------------------------
def test_the_mapped_call_is_in_the_spec_its_json_and_the_plan() -> None:
    from interlock.core.backend.plan import lower
    from interlock.core.backend.protocol import features_used
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = spec_of(sp.sweep)
    call = next(c for c in spec.subs if c.name == "trial")
    assert call.map is not None and call.map.ports == ("lr",)
    assert [p.name for p in call.items] == ["lr"]
    # the body reads one element; it waits for the step that makes the list
    assert spec.node("trial.fit").bindings["lr"].param == "trial[].lr"
    assert spec.node("trial.fit").after == ("make_lrs",)
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert "map.subpipeline" in features_used(spec)
    assert "call sub:trial (pipeline trial, map over lr)" in lower(spec).describe()


def test_outside_the_call_each_output_is_a_list() -> None:
    @il.step
    def wants_one(x: float) -> float:
        return x

    with pytest.raises(PipelineDefinitionError, match=r"list\[float\]"):
        @il.pipeline(name="bad-reader")
        def bad(lrs: list[float] = [1.0]):  # noqa: B006
            wants_one(x=il.map(sp.trial, over=lrs, data="a"))

        spec_of(bad)


@pytest.mark.parametrize(("case", "match"), [
    ("ambiguous", "cannot tell which parameter"),
    ("unknown", "not a parameter of the sub-pipeline"),
    ("type", r"list\[float\]"),
    ("both", "both the mapped item and a broadcast"),
])
def test_mistakes_are_refused_while_the_pipeline_is_built(case: str, match: str) -> None:
    def body() -> None:
        if case == "ambiguous":
            il.map(sp.trial, over=[1.0])
        elif case == "unknown":
            il.map(sp.trial, over=[1.0], item="rate", data="a")
        elif case == "type":
            il.map(sp.trial, over=["x"], data="a")
        else:
            il.map(sp.trial, over=[1.0], item="lr", lr=2.0, data="a")

    @il.pipeline(name=f"bad-{case}")
    def bad() -> None:
        body()

    with pytest.raises(PipelineDefinitionError, match=match):
        spec_of(bad)


def test_an_il_finally_inside_a_mapped_body_is_refused_with_a_hint() -> None:
    @il.step
    def report(status: il.RunStatus) -> None:
        return None

    @il.pipeline(name="with-finally")
    def with_finally(lr: float) -> float:
        il.finally_(report)
        return sp.fit(lr=lr, data="a")

    @il.pipeline(name="bad-finally")
    def bad() -> None:
        il.map(with_finally, over=[1.0])

    with pytest.raises(PipelineDefinitionError, match="il.finally_ inside a mapped sub-pipeline") as err:
        spec_of(bad)
    assert err.value.hint and "around the il.map call" in err.value.hint


def test_a_backend_that_cannot_render_it_refuses_at_build_naming_the_call(tmp_path: Path) -> None:
    from interlock.core.backend.protocol import available_backends, check_capabilities, get_backend

    spec = spec_of(sp.sweep)
    for name in sorted(available_backends()):
        caps = get_backend(name).capabilities()
        if caps.supports("map.subpipeline"):
            continue
        with pytest.raises(CapabilityError, match="map.subpipeline") as err:
            check_capabilities(spec, caps)
        assert "trial" in str(err.value) and err.value.hint, name


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "branch.value"))
def test_the_ported_loop_body_example_gives_the_original_result(backend: str, tmp_path: Path) -> None:
    from docs.examples import map_subpipeline as example

    r = il.run(example.sweep, backend=backend, workdir=tmp_path)
    assert r.outputs == example.EXPECTED
    assert _statuses(r) == {"ex-trial.train": S, "ex-trial.evaluate": S, "ex-trial.keep": S, "ex-trial.drop": S,
                            "summarize": S}
    assert r.steps["ex-trial.keep"].attempts == 1 and r.steps["ex-trial.drop"].attempts == 2
    guide = (Path(__file__).resolve().parents[2] / "docs" / "control-flow-map.md").read_text()
    assert "examples/map_subpipeline.py" in guide


# -- a map over items' fields (issue 24, item 7) -------------------------------------------------------
@pytest.mark.parametrize("backend", backend_params("map.fields"))
def test_each_field_of_a_dict_item_goes_to_the_input_of_its_name(backend: str, tmp_path: Path) -> None:
    r = _run(sp.fields_dicts, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [6.0, 15.0]  # (1 + 2.0) * 2, (3 + 4.5) * 2
    assert r.maps["combine"].items == 2


@pytest.mark.parametrize("backend", backend_params("map.fields"))
def test_typed_records_and_renamed_fields(backend: str, tmp_path: Path) -> None:
    r = _run(sp.fields_records, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [1.5, 3.0, 4.5]  # a + b for Pair(i, i / 2)
    renamed = _run(sp.fields_renamed, backend, tmp_path)
    assert renamed.outputs["o0"] == [10.5, 21.0]  # field a to input x, b to y


@pytest.mark.parametrize("backend", backend_params("map.fields", "map.subpipeline"))
def test_fields_of_each_item_to_the_parameters_of_a_mapped_sub_pipeline(backend: str, tmp_path: Path) -> None:
    r = _run(sp.fields_subpipeline, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [2.0, 4.0]  # (a + b) + b for Pair(1, 0.5), Pair(2, 1.0)
    assert _statuses(r) == {"pairs": S, "pair-trial.combine": S, "pair-trial.score": S}


@pytest.mark.parametrize("backend", backend_params("map.fields"))
def test_an_item_without_a_field_fails_the_map_before_any_item(backend: str, tmp_path: Path) -> None:
    r = _run(sp.fields_missing, backend, tmp_path)
    assert not r.succeeded and r.error is not None and r.error.step == "combine"
    assert "no field 'b'" in str(r.error)


def test_the_fields_are_in_the_spec_and_its_json() -> None:
    from interlock.core.backend.protocol import features_used
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = spec_of(sp.fields_renamed)
    m = spec.node("renamed").map
    assert m is not None and m.fields == (("a", "x"), ("b", "y")) and m.item == "x"
    assert m.record is not None and m.record.name and m.record.name.endswith("Pair")
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert "map.fields" in features_used(spec)


@pytest.mark.parametrize(("case", "match"), [
    ("no-input", "field 'c' of the item has no input 'c'"),
    ("no-field", "has no field 'z'"),
    ("type", "field 'a' of the item is str"),
    ("unbound", "input 'b' of step 'combine' is neither an item field nor a broadcast"),
    ("zip", "the fields of each item name the inputs already"),
])
def test_field_mistakes_are_refused_while_the_pipeline_is_built(case: str, match: str) -> None:
    def body() -> None:
        if case == "no-input":
            il.map(sp.combine, over=[{"a": 1, "b": 2.0, "c": 3}], fields=True)
        elif case == "no-field":
            il.map(sp.combine, over=sp.pairs(n=1), fields={"z": "a"}, b=1.0)
        elif case == "type":
            il.map(sp.combine, over=sp.named_records(), fields=True)
        elif case == "unbound":
            il.map(sp.combine, over=[{"a": 1}], fields=True)
        else:
            il.map(sp.combine, over=il.zip(a=[1], b=[2.0]), fields=True)

    @il.pipeline(name=f"bad-fields-{case}")
    def bad() -> None:
        body()

    with pytest.raises(PipelineDefinitionError, match=match) as err:
        spec_of(bad)
    assert err.value.step == "combine"


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "failure_policy.continue"))
def test_under_continue_a_failed_mapped_call_stops_only_what_reads_it(backend: str, tmp_path: Path) -> None:
    r = _run(sp.sweep_continue, backend, tmp_path)
    assert not r.succeeded and r.error is not None and r.error.step == "trial.fit"
    assert _statuses(r) == {"trial.fit": F, "trial.score": S, "independent": S, "best": N}


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "gates"))
def test_a_mapped_call_inside_a_plain_call_and_inside_a_closed_block(backend: str, tmp_path: Path) -> None:
    r = _run(sp.placed, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == 7.0  # max(1*3+1, 2*3+1)
    assert _statuses(r) == {"wrapper.trial.fit": S, "wrapper.trial.score": S, "wrapper.best": S, "flag": S,
                            "gated.fit": S, "gated.score": S, "kept": S}
    assert r.maps["wrapper.trial"].items == 2 and r.maps["gated"].items == 2
    closed = _run(sp.placed, backend, tmp_path / "closed", on=False)
    assert closed.succeeded, closed.error
    assert {k: v for k, v in _statuses(closed).items() if k.startswith("gated") or k == "kept"} == {
        "gated.fit": "skipped", "gated.score": "skipped", "kept": "skipped"}
    assert "gated" not in closed.maps


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.subpipeline.tolerate", "cache"))
def test_a_rerun_of_items_that_all_succeeded_is_a_cache_hit_for_the_cached_body_step(backend: str,
                                                                                      tmp_path: Path) -> None:
    first = _run(sp.sweep_cached, backend, tmp_path, lrs=[1.0, 2.0])
    again = _run(sp.sweep_cached, backend, tmp_path, lrs=[1.0, 2.0])
    assert again.succeeded and again.outputs == first.outputs == {"o0": [3.0, 5.0]}
    assert _statuses(first)["cached-trial.cached_fit"] == S
    # every item of the cached step hit the cache; the uncached step ran again
    assert _statuses(again) == {"cached-trial.cached_fit": C, "cached-trial.score": S, "kept": S}


def test_a_spec_whose_mapped_call_lost_its_list_is_refused() -> None:
    import dataclasses

    from interlock.core.model.graph import validate

    spec = spec_of(sp.sweep)
    call = next(c for c in spec.subs if c.name == "trial")
    broken = dataclasses.replace(spec, subs=(dataclasses.replace(call, inputs=(("data", dict(call.inputs)["data"]),)),))
    with pytest.raises(PipelineDefinitionError, match="its list 'lr' is not bound"):
        validate(broken)


def test_a_resumed_run_keeps_the_items_that_finished_and_runs_the_failed_one(tmp_path: Path) -> None:
    """local: a resume (the same run id) does not run again a body step that succeeded in an item
    with the same code and inputs, as it keeps finished steps and a step map's finished items."""
    gate, log = tmp_path / "gate", tmp_path / "log"
    params = {"gate": str(gate), "log": str(log)}
    first = il.run(sp.sweep_resume, backend="local", workdir=tmp_path / "work", run_id="r1", raise_on_failure=False,
                   **params)
    assert not first.succeeded and first.maps["logged-trial"].failed == [1]
    assert sorted(log.read_text().split("\n")[:-1]) == ["fit -2.0", "fit 1.0", "fit 3.0", "score 1.0", "score 3.0"]
    log.write_text("")
    gate.write_text("")  # the cause is fixed
    again = il.run(sp.sweep_resume, backend="local", workdir=tmp_path / "work", resume="r1", **params)
    assert again.succeeded and again.outputs == {"o0": 4.0}
    assert log.read_text().split("\n")[:-1] == ["fit -2.0", "score 2.0"]  # only the failed item ran
    assert _statuses(again) == {"logged-trial.logged_fit": S, "logged-trial.logged_score": S, "best": S}


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.tolerate", "map.subpipeline.nested"))
def test_a_tolerant_step_map_inside_a_mapped_sub_pipeline(backend: str, tmp_path: Path) -> None:
    r = _run(sp.tolerant_inner, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [1.0 + 2**0.5, 2.0 + 5**0.5]  # the -row item of each row tolerated
    assert _statuses(r) == {"tolerant-row.row_cells": S, "tolerant-row.safe_root": S, "tolerant-row.row_total": S}
    assert _map(r, "tolerant-row") == {"items": 2, "failed": [], "allowed": 0}


@pytest.mark.parametrize("backend", backend_params("map.subpipeline", "map.fields", "map.subpipeline.nested"))
def test_a_step_map_over_fields_inside_a_mapped_sub_pipeline(backend: str, tmp_path: Path) -> None:
    r = _run(sp.fields_inner, backend, tmp_path)
    assert r.succeeded, r.error
    assert r.outputs["o0"] == [[2.5, 2.5], [3.5, 4.5]]  # a + b of each record, per row
    assert _statuses(r) == {"fields-row.row_records": S, "fields-row.combine": S}
    assert r.steps["fields-row.combine"].attempts == 4  # two records in each of two rows


def test_a_spec_with_a_finally_inside_a_mapped_call_is_refused() -> None:
    import dataclasses

    from interlock.core.model.graph import validate

    spec = spec_of(sp.sweep)
    call = next(c for c in spec.subs if c.name == "trial")
    # what il.map refuses while the pipeline is built, refused the same way in a spec edited or read back
    broken = dataclasses.replace(spec, subs=(dataclasses.replace(call, finally_=call.nodes[0]),))
    with pytest.raises(PipelineDefinitionError, match="holds an il.finally_"):
        validate(broken)
