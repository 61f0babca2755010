"""il.when on every backend: nested blocks whose true branch is last, sibling blocks holding
chains, conditions produced inside a block, and conditions written as expressions. Each
pipeline runs on local, flyte-local and kfp-local with identical outputs (types included) and
step statuses, and compiles to the backend's own condition construct (no helper tasks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from backends import runnable_backends

import interlock as il
from conformance import branch_pipelines as bp

BACKENDS = runnable_backends()


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[str, dict[str, Any], dict[str, str]]:
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, **params)
    outputs = {k: (type(v).__name__, v) for k, v in r.outputs.items()}
    return str(r.status), outputs, {k: str(s.status) for k, s in r.steps.items()}


def _agree(pipeline: Any, tmp_path: Path, backends: list[str] = BACKENDS, **params: Any) -> tuple[str, dict, dict]:
    results = {b: _run(pipeline, b, tmp_path, **params) for b in backends}
    reference = results["local"]
    for backend, got in results.items():
        assert got == reference, f"{backend} differs from local"
    return reference


def test_nested_blocks_three_deep_with_the_true_block_last(tmp_path: Path) -> None:
    status, outputs, steps = _agree(bp.nested_last, tmp_path)
    assert status == "succeeded" and outputs == {"o0": ("str", "end:3.0")}
    assert steps["l2-first-body"] == steps["l3-first-body"] == "skipped"
    # flyte-local skipped all of these ("skipped by a gate" / not run) before the fix
    for node in ("l3-last-body", "l3-last-more", "l2-after", "l1-after"):
        assert steps[node] == "succeeded", node


def test_a_guard_in_a_later_nested_block_fails_the_run(tmp_path: Path) -> None:
    """Flyte's nested-conditions example: radius=0.95 must fail the run, not be bypassed."""
    status, _, steps = _agree(bp.nested_guard, tmp_path, radius=0.95)
    assert status == "failed" and steps["fail_with"] == "failed"
    status, outputs, steps = _agree(bp.nested_guard, tmp_path / "small", radius=0.3)
    assert status == "succeeded" and outputs == {"o0": ("str", "done:0.3")}
    assert steps["big-area"] == steps["fail_with"] == "skipped"


def test_sibling_blocks_with_chains(tmp_path: Path) -> None:
    status, _, steps = _agree(bp.sibling_chains, tmp_path)
    assert status == "succeeded"
    assert [steps[n] for n in ("high-tag", "high-more", "high-most")] == ["succeeded"] * 3
    assert [steps[n] for n in ("low-tag", "low-more")] == ["skipped"] * 2


def test_a_condition_produced_inside_the_outer_block(tmp_path: Path) -> None:
    status, _, steps = _agree(bp.inner_condition, tmp_path)
    assert status == "succeeded" and all(s == "succeeded" for s in steps.values())


def test_expressions_over_outputs_and_parameters(tmp_path: Path) -> None:
    status, outputs, steps = _agree(bp.expressions, tmp_path)
    assert outputs == {"o0": ("int", 7)}
    assert {n for n, s in steps.items() if s == "skipped"} == {"small", "stopped"}
    _, _, steps = _agree(bp.expressions, tmp_path / "other", n=2, label="tails", go=False)
    assert {n for n, s in steps.items() if s == "succeeded"} == {"count", "flip", "other", "small", "stopped"}


def test_or_conditions_agree_where_the_backend_expresses_them(tmp_path: Path) -> None:
    _, _, steps = _agree(bp.expressions_or, tmp_path, runnable_backends("condition.or"))
    assert steps["either"] == "skipped" and steps["neither"] == "succeeded"


def test_kfp_refuses_or_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(il.PipelineDefinitionError, match="cannot express 'condition.or'"):
        il.compile(bp.expressions_or, backend="kfp", out=tmp_path)


# -- compiled artifacts ---------------------------------------------------------------------------
def _kfp_ir(pipeline: Any, tmp_path: Path) -> dict[str, Any]:
    [path] = il.compile(pipeline, backend="kfp", out=tmp_path)
    return next(iter(yaml.safe_load_all(path.read_text())))


def _conditions(ir: dict[str, Any]) -> list[str]:
    found = []
    for comp in [ir["root"], *ir["components"].values()]:
        for task in comp.get("dag", {}).get("tasks", {}).values():
            cond = task.get("triggerPolicy", {}).get("condition")
            if cond:
                found.append(cond)
    return found


def test_kfp_compiles_each_block_as_one_condition_group(tmp_path: Path) -> None:
    ir = _kfp_ir(bp.sibling_chains, tmp_path / "s")
    groups = [name for name in ir["components"] if name.startswith("comp-condition")]
    assert len(groups) == 2  # one dsl.If per il.when block, not one per contiguous run
    ir = _kfp_ir(bp.inner_condition, tmp_path / "i")
    assert len([n for n in ir["components"] if n.startswith("comp-condition")]) == 2


def test_kfp_expressions_are_native_conditions_not_tasks(tmp_path: Path) -> None:
    ir = _kfp_ir(bp.expressions, tmp_path)
    executors = ir["deploymentSpec"]["executors"]
    assert len(executors) == len(il.spec(bp.expressions).nodes)  # one per node: no helper components
    conds = " ".join(_conditions(ir))
    assert "> 5" in conds and "== 'heads'" in conds and "!= 'tails'" in conds
    assert "<= 5" in conds  # ~(c > 5): negation pushed into the comparison


def test_flyte_expressions_compile_to_branch_nodes(tmp_path: Path) -> None:
    from flyteidl.admin import workflow_pb2

    files = il.compile(bp.expressions, backend="flyte", out=tmp_path, project="p", domain="d", version="v1",
                       image="img:1")
    [path] = [f for f in files if f.name.endswith("_conf-expressions_2.pb")]
    wf = workflow_pb2.WorkflowSpec()
    wf.ParseFromString(path.read_bytes())
    branches = {n.id: n.branch_node.if_else.case.condition for n in wf.template.nodes if n.HasField("branch_node")}
    assert len(branches) == 6
    both = branches["gate-1"]
    assert both.HasField("conjunction")
    assert both.conjunction.left_expression.comparison.operator == 2  # GT
    assert both.conjunction.right_expression.comparison.right_value.primitive.string_value == "heads"
    other = branches["gate-3"].comparison  # c > other: two outputs
    assert other.left_value.var and other.right_value.var


def test_a_step_called_twice_with_the_same_inputs_runs_twice_on_every_backend(tmp_path: Path) -> None:
    """Within one run the second call is never served from the first one's cache entry (it was
    on `local` only); a later run hits the cache for both, on every backend."""
    for backend in BACKENDS:
        work = tmp_path / backend
        first = il.run(bp.twice, backend=backend, workdir=work)
        assert first.steps["cached_double"].status == first.steps["again"].status == "succeeded", backend
        assert first.outputs == {"o0": "a:3.0+b:3.0"}
        second = il.run(bp.twice, backend=backend, workdir=work)
        assert second.steps["cached_double"].status == second.steps["again"].status == "cached", backend


# -- elif / otherwise and branch values --------------------------------------------------------------
@pytest.mark.parametrize(("radius", "ran", "value"), [
    (20.0, "big-area", 1256.636), (3.0, "mid-area", 56.5486), (1.5, "small-area", 21.2057), (0.5, "tiny-area", 3.1416),
])
def test_a_branch_value_is_the_taken_branch_value_and_a_pipeline_output(
    tmp_path: Path, radius: float, ran: str, value: float,
) -> None:
    status, outputs, steps = _agree(bp.branch_value_pipeline, tmp_path, radius=radius)
    assert status == "succeeded"
    assert outputs == {"o0": ("float", value), "o1": ("str", f"area:{value}")}
    areas = {"big-area", "mid-area", "small-area", "tiny-area"}
    assert {n for n in areas if steps[n] == "succeeded"} == {ran}
    assert all(steps[n] == "skipped" for n in areas - {ran})


@pytest.mark.parametrize(("n", "label"), [(4, "tails"), (3, "heads"), (50, "heads"), (500, "x")])
def test_chains_nested_in_a_block_and_without_otherwise(tmp_path: Path, n: int, label: str) -> None:
    status, outputs, steps = _agree(bp.chain_nested, tmp_path, n=n, label=label)
    assert status == "succeeded" and outputs == {"o0": ("int", n)}
    assert steps["exactly"] == ("succeeded" if n == 3 else "skipped")
    assert steps["say-heads"] == ("succeeded" if label == "heads" else "skipped")
    assert steps["large"] == ("succeeded" if 10 < n <= 100 else "skipped")


def test_kfp_renders_a_chain_as_if_elif_else_and_the_value_as_one_of(tmp_path: Path) -> None:
    ir = _kfp_ir(bp.branch_value_pipeline, tmp_path)
    assert "comp-condition-branches-1" in ir["components"]  # dsl.If/Elif/Else share one branches group
    conds = _conditions(ir)
    assert len(conds) == 4 and conds[-1].count("!(") == 3  # dsl.Else: every earlier condition false
    group = ir["components"]["comp-condition-branches-1"]["dag"]["outputs"]["parameters"]
    [selectors] = [v["valueFromOneof"]["parameterSelectors"] for v in group.values()]
    assert len(selectors) == 4  # dsl.OneOf over the four branches
    out = ir["root"]["dag"]["outputs"]["parameters"]["o0"]["valueFromParameter"]
    assert out["producerSubtask"] == "condition-branches-1"


def test_flyte_renders_a_chain_as_one_conditional_with_outputs(tmp_path: Path) -> None:
    from flyteidl.admin import workflow_pb2

    files = il.compile(bp.branch_value_pipeline, backend="flyte", out=tmp_path, project="p", domain="d",
                       version="v1", image="img:1")
    [path] = [f for f in files if f.name.endswith("_conf-branch-value_2.pb")]
    wf = workflow_pb2.WorkflowSpec()
    wf.ParseFromString(path.read_bytes())
    [branch] = [n for n in wf.template.nodes if n.HasField("branch_node")]
    if_else = branch.branch_node.if_else
    assert len(if_else.other) == 2 and if_else.HasField("else_node")  # if_ / 2 x elif_ / else_
    assert wf.template.outputs[0].binding.promise.node_id == branch.id  # the value is the conditional's output
    subs = {s.id.name for s in wf.sub_workflows}
    assert {f"conf-branch-value.gate-{i}" for i in range(1, 5)} <= subs


def test_branch_value_refuses_a_value_missing_from_a_branch() -> None:
    @il.pipeline(name="missing-branch")
    def p(x: float = 1.0):
        with il.when(x > 1.0):
            a = bp.tag.named("a")(label="a", x=x)
        with bp.elif_(x > 0.0):
            bp.tag.named("b")(label="b", x=x)
        with bp.otherwise():
            c = bp.tag.named("c")(label="c", x=x)
        return bp.branch_value(a, c)

    with pytest.raises(il.PipelineDefinitionError, match="exactly one output produced directly in each block"):
        il.spec(p)

    @il.pipeline(name="no-otherwise")
    def q(x: float = 1.0):
        with il.when(x > 1.0):
            a = bp.tag.named("a")(label="a", x=x)
        with bp.elif_(x > 0.0):
            b = bp.tag.named("b")(label="b", x=x)
        return bp.branch_value(a, b)

    with pytest.raises(il.PipelineDefinitionError, match="no il.otherwise block"):
        il.spec(q)


def test_elif_must_follow_its_block_directly() -> None:
    @il.pipeline(name="elif-gap")
    def p(x: float = 1.0):
        with il.when(x > 1.0):
            bp.tag.named("a")(label="a", x=x)
        flag = bp.is_above(x=x, limit=0.0)
        with bp.elif_(flag):
            bp.tag.named("b")(label="b", x=x)

    with pytest.raises(il.PipelineDefinitionError, match="must directly follow an il.when") as info:
        il.spec(p)
    assert "compute the condition before" in (info.value.hint or "")


def test_interlock_backends_lists_how_each_backend_renders_branches() -> None:
    from interlock.core.backend.protocol import get_backend

    caps = {name: get_backend(name).capabilities() for name in ("local", "flyte", "kfp")}
    for name, c in caps.items():
        for feature in ("gates", "condition.expression", "condition.or", "branch.chain", "branch.value"):
            assert feature in c.features, (name, feature)
    assert "dsl.OneOf" in caps["kfp"].features["branch.value"]
    assert not caps["kfp"].supports("condition.or") and caps["flyte"].supports("condition.or")


@pytest.mark.parametrize(("n", "ran"), [(5, {"odd-big"}), (4, {"small-ratio"}), (2, {"small-ratio"})])
def test_expressions_on_named_tuple_outputs(tmp_path: Path, n: int, ran: set[str]) -> None:
    """kfp-local resolves conditions only on outputs named "Output": it used to leave these not-run."""
    _, _, steps = _agree(bp.expr_named, tmp_path, n=n)
    assert {s for s in ("odd-big", "small-ratio") if steps[s] == "succeeded"} == ran


def test_a_branch_value_in_a_condition_is_refused_with_a_fix() -> None:
    @il.pipeline(name="value-in-condition")
    def p(x: float = 1.0):
        with il.when(x > 1.0):
            a = bp.area.named("a")(radius=x, scale=1.0)
        with bp.otherwise():
            b = bp.area.named("b")(radius=x, scale=2.0)
        with il.when(bp.branch_value(a, b) > 2.0):
            bp.shout(text="big")

    with pytest.raises(il.PipelineDefinitionError, match="cannot read branch value of a.o0 / b.o0") as info:
        il.spec(p)
    assert "pass the value to a step" in (info.value.hint or "")


@pytest.mark.parametrize(("radius", "go", "value"), [(3.0, True, 28.2743), (1.0, False, 6.2832)])
def test_a_branch_value_read_in_a_later_block(tmp_path: Path, radius: float, go: bool, value: float) -> None:
    _, outputs, steps = _agree(bp.value_later, tmp_path, radius=radius, go=go)
    assert outputs == {"o0": ("float", value)}
    assert steps["inside"] == ("succeeded" if go else "skipped")


@pytest.mark.parametrize(("x", "ran"), [(30.0, "big-tag"), (3.0, "mid-tag"), (0.5, "tiny-tag")])
def test_an_inner_chain_value_is_an_outer_branch_value(tmp_path: Path, x: float, ran: str) -> None:
    status, outputs, steps = _agree(bp.nested_value, tmp_path, x=x)
    label = ran.removesuffix("-tag")
    assert status == "succeeded"
    assert outputs == {"o0": ("str", f"{label}:{x}"), "o1": ("str", f"{label}:{x}+out")}
    tags = {"big-tag", "mid-tag", "tiny-tag"}
    assert {n for n in tags if steps[n] == "succeeded"} == {ran}
    assert all(steps[n] == "skipped" for n in tags - {ran})
    assert steps["inner-use"] == ("skipped" if ran == "big-tag" else "succeeded")


def test_kfp_passes_an_inner_chain_value_through_its_block(tmp_path: Path) -> None:
    """KFP refuses a dsl.OneOf inside another: the inner value goes through a task in the block."""
    ir = _kfp_ir(bp.nested_value, tmp_path)
    comps = ir["components"]
    [outer] = [c for c in comps.values() if "dag" in c and any(
        "valueFromOneof" in v for v in c["dag"].get("outputs", {}).get("parameters", {}).values())
        and any("pass-value" in t["componentRef"]["name"] for t in _all_tasks(ir, c))]
    [selectors] = [v["valueFromOneof"]["parameterSelectors"] for v in outer["dag"]["outputs"]["parameters"].values()]
    assert len(selectors) == 2  # the outer dsl.OneOf: big-tag, and the pass-through of the inner one


def _all_tasks(ir: dict[str, Any], comp: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for t in comp.get("dag", {}).get("tasks", {}).values():
        found.append(t)
        found += _all_tasks(ir, ir["components"].get(t["componentRef"]["name"], {}))
    return found


def test_flyte_returns_an_inner_chain_value_from_the_outer_branch(tmp_path: Path) -> None:
    from flyteidl.admin import workflow_pb2

    files = il.compile(bp.nested_value, backend="flyte", out=tmp_path, project="p", domain="d", version="v1",
                       image="img:1")
    [path] = [f for f in files if f.name.endswith("_conf-nested-value_2.pb")]
    wf = workflow_pb2.WorkflowSpec()
    wf.ParseFromString(path.read_bytes())
    [branch] = [n for n in wf.template.nodes if n.HasField("branch_node")]
    assert wf.template.outputs[0].binding.promise.node_id == branch.id  # the outer conditional's output
    [otherwise] = [s for s in wf.sub_workflows if s.id.name == "conf-nested-value.gate-2"]
    [inner] = [n for n in otherwise.nodes if n.HasField("branch_node")]
    assert otherwise.outputs[0].binding.promise.node_id == inner.id  # ... is the inner conditional's


def test_a_nested_value_from_a_deeper_block_is_refused() -> None:
    @il.pipeline(name="nested-too-deep")
    def p(x: float = 1.0):
        with il.when(x > 2.0):
            a = bp.tag.named("a")(label="a", x=x)
        with bp.otherwise():
            with il.when(x > 0.0):
                bp.tag.named("pos")(label="pos", x=x)
                with il.when(x > 0.5):
                    m = bp.tag.named("m")(label="m", x=x)
                with bp.otherwise():
                    t = bp.tag.named("t")(label="t", x=x)
                inner = bp.branch_value(m, t)
            bp.branch_value(a, inner)

    with pytest.raises(il.PipelineDefinitionError, match="one output produced directly in each block"):
        il.spec(p)


ALL = ["nested_last", "nested_guard", "sibling_chains", "inner_condition", "expressions", "expressions_or",
       "twice", "branch_value_pipeline", "chain_nested", "expr_named", "value_later", "nested_value"]


@pytest.mark.parametrize("name", ALL)
def test_every_branch_pipeline_compiles_for_flyte_and_kfp(tmp_path: Path, name: str) -> None:
    pipeline = getattr(bp, name)
    files = il.compile(pipeline, backend="flyte", out=tmp_path / "flyte", project="p", domain="d", version="v1",
                       image="img:1")
    assert any(f.name.endswith(f"_{pipeline.name}_2.pb") for f in files)
    if name == "expressions_or":
        return  # refused for KFP: test_kfp_refuses_or_at_build_time
    [path] = il.compile(pipeline, backend="kfp", out=tmp_path / "kfp")
    assert path.exists()


def test_a_branch_value_over_two_maps_agrees_everywhere_and_compiles_for_kfp(tmp_path: Path) -> None:
    status, outputs, steps = _agree(bp.branch_value_of_maps, tmp_path / "big", big=True)
    assert status == "succeeded" and outputs == {"o0": ("int", 18)}
    assert steps["tripled"] == "succeeded" and steps["doubled"] == "skipped"
    status, outputs, _ = _agree(bp.branch_value_of_maps, tmp_path / "small", big=False)
    assert outputs == {"o0": ("int", 12)}
    if "kfp-local" in BACKENDS:
        [path] = il.compile(bp.branch_value_of_maps, "kfp", out=tmp_path / "ir")
        ir = next(yaml.safe_load_all(path.read_text()))
        # Each map's Collected goes through a pass-through task in its block; OneOf reads those.
        passes = [name for name in ir["components"] if name.startswith("comp-pass-value")]
        assert len(passes) == 2, list(ir["components"])


def test_after_from_inside_a_block_to_a_step_outside_it_runs_alike(tmp_path: Path) -> None:
    status, outputs, steps = _agree(bp.after_into_blocks, tmp_path / "go", go=True)
    assert status == "succeeded" and outputs == {"o0": ("str", "inside")}
    assert (steps["note"], steps["inside"], steps["other"], steps["held"], steps["tidy"]) == (
        "succeeded", "succeeded", "skipped", "succeeded", "succeeded")
    _, outputs, steps = _agree(bp.after_into_blocks, tmp_path / "stay", go=False)
    assert outputs == {"o0": ("str", "other")} and steps["inside"] == "skipped"
