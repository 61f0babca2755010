"""The lowered plan (core/backend/plan.py): the nesting and order every backend renders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from plan_example import plan_example

import interlock as il
from interlock.core.backend.plan import Chain, FinallyScope, Step, Unit, lower
from interlock.core.model.conditions import condition_of
from interlock.core.model.pipeline_spec import PipelineSpec

DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
EXAMPLE = DOCS.parent / "examples" / "plan_example.py"


@il.step
def above(x: float, limit: float) -> bool:
    return x > limit


@il.step
def tag(label: str, x: float) -> str:
    return f"{label}:{x}"


@il.step
def words(text: str) -> list[str]:
    return text.split()


@il.step
def size(word: str) -> int:
    return len(word)


@il.step
def total(xs: list[int]) -> int:
    return sum(xs)


@il.step
def report(status: il.RunStatus, label: str) -> None:
    print(label, status.status)


class Stats(NamedTuple):
    n: int
    label: str


@il.pipeline(name="plan-prep")
def prep(text: str) -> Stats:
    n = total(xs=il.map(size, over=words(text=text)))
    return Stats(n, tag(label="prep", x=n))


@il.pipeline(name="plan-chains")
def chains(x: float = 3.0):
    """Nested when/elif/otherwise with a branch value, and a sibling block declared before its reader."""
    first = tag.named("first")(label="first", x=x)
    with il.when(above.named("positive")(x=x, limit=0.0)):
        with il.when(x > 10.0):
            big = tag.named("big")(label="big", x=x)
        with il.elif_(x > 2.0):
            mid = tag.named("mid")(label="mid", x=x)
        with il.otherwise():
            small = tag.named("small")(label="small", x=x)
        picked = il.branch_value(big, mid, small)
        tag.named("after-chain")(label=picked, x=x)
    return first


@il.pipeline(name="plan-calls")
def calls(text: str = "a bb ccc", other: str = "dddd"):
    """A sub-pipeline (with a map inside) called twice; a step reads both; a map inside a block."""
    a = prep(text=text)
    b = prep.named("prep-b")(text=other)
    both = total.named("both")(xs=[a.n, b.n])
    with il.when(both > 3):
        il.map(size.named("sizes"), over=words.named("split")(text=text))
    return both


@il.pipeline(name="plan-finally")
def guarded(x: float = 1.0):
    """A step outside the block falls between the block's steps in the spec's topological order."""
    before = tag.named("before")(label="before", x=x)
    with il.finally_(report.named("cleanup"), label="block"):
        inner = tag.named("inner")(label=before, x=x)
        with il.when(above.named("check")(x=x, limit=0.5)):
            tag.named("checked")(label=inner, x=x)
    return tag.named("after")(label=before, x=x)


@il.step
def explode(flag: bool) -> str:
    raise ValueError(f"not with {flag}")


@il.pipeline(name="plan-local-order")
def interleaved(x: float = 1.0):
    """The spec's topological order puts ``after`` between the block's two steps."""
    flag = above.named("flag")(x=x, limit=0.5)
    with il.when(flag):
        one = tag.named("one")(label="one", x=x)
        tag.named("two")(label=one, x=x)
    explode.named("after")(flag=flag)


def shape(units: tuple[Unit, ...]) -> list[object]:
    """The plan as nested lists of keys: the nesting and order at a glance."""
    out: list[object] = []
    for u in units:
        if isinstance(u, Step):
            out.append(u.key)
        elif isinstance(u, Chain):
            out.append({u.key: [{b.key: shape(b.units)} for b in u.blocks]})
        else:
            out.append({u.key: shape(u.units)})
    return out


def test_nested_when_elif_otherwise_nests_as_written() -> None:
    spec = il.spec(chains)
    plan = lower(spec)
    assert shape(plan.units) == [
        "first", "positive",
        {"gate-1": [{"gate-2": [{"gate-2": ["big"]}, {"gate-3": ["mid"]}, {"gate-4": ["small"]}]}, "after-chain"]},
    ]
    chain = plan.chain_of("gate-3")
    assert chain is not None and chain is plan.chain_of("gate-2") and plan.chain_of("gate-1") is None
    assert [b.key for b in chain.blocks] == ["gate-2", "gate-3", "gate-4"]
    (value,) = chain.values  # the branch value the chain yields: one option per block
    assert [o.node for o in value.options] == ["big", "mid", "small"]
    assert plan.gates_in("gate-1") == ("gate-1", "gate-2", "gate-3", "gate-4")


def test_a_sub_pipeline_called_twice_is_two_scopes_with_their_own_units() -> None:
    plan = lower(il.spec(calls))
    assert shape(plan.units) == [
        {"sub:plan-prep": ["plan-prep.words", "plan-prep.size", "plan-prep.total", "plan-prep.tag"]},
        {"sub:prep-b": ["prep-b.words", "prep-b.size", "prep-b.total", "prep-b.tag"]},
        "both",
        {"gate-1": ["split", "sizes"]},
    ]
    for name in ("plan-prep", "prep-b"):
        c = plan.call(name)
        assert c is plan.scope(c.key) and c.call.pipeline == "plan-prep"
        assert [k for k, _ in c.inputs] == ["text"] and [k for k, _ in c.outputs] == ["n"]
        assert plan.nodes_in(c.key) == tuple(f"{name}.{n}" for n in ("words", "size", "total", "tag"))
    mapped = [u.node.name for u in (*plan.call("plan-prep").units, *plan.scope("gate-1").units)
              if isinstance(u, Step) and u.node.map is not None]
    assert mapped == ["plan-prep.size", "sizes"]  # a map is a step, in a call or a block alike


def test_a_finally_block_is_one_scope_and_a_step_it_does_not_hold_runs_after_it() -> None:
    spec = il.spec(guarded)
    assert [n.name for n in spec.nodes] == ["before", "check", "inner", "after", "checked"]  # interleaved
    plan = lower(spec)
    assert shape(plan.units) == ["before", {"cleanup-block": ["check", "inner", {"gate-1": ["checked"]}]}, "after"]
    scope = plan.scope("cleanup-block")
    assert isinstance(scope, FinallyScope) and scope.block.node.name == "cleanup"
    assert plan.gates_in("cleanup-block") == ("gate-1",)


def test_every_node_once_after_what_it_reads_and_the_same_plan_each_time() -> None:
    for pipeline in (chains, calls, guarded, plan_example):
        spec = il.spec(pipeline)
        plan = lower(spec)
        order = [n.name for n in plan.nodes()]
        assert sorted(order) == sorted(n.name for n in spec.nodes) and len(set(order)) == len(order)
        at = {n: i for i, n in enumerate(order)}
        for n in spec.nodes:
            reads = set(n.upstream())
            for g in spec.gate_chain(n.gate):
                reads |= {b.node for b in condition_of(g).bindings() if b.node}
            assert all(at[r] < at[n.name] for r in reads), (spec.name, n.name)
        assert lower(PipelineSpec.loads(spec.dumps())).describe() == plan.describe()  # read back from JSON


def test_the_plan_in_the_architecture_page_is_what_describe_prints() -> None:
    section = DOCS.read_text().split("## The lowered plan", 1)[1].split("\n## ", 1)[0]
    assert "docs/examples/plan_example.py" in section
    printed = re.findall(r"```text\n(plan .*?)```", section, re.S)
    assert printed, "docs/architecture.md shows the example's plan"
    assert printed[0].rstrip("\n") == lower(il.spec(plan_example)).describe()
    shown = re.findall(r"```python[^\n]*\n(.*?)```", section, re.S)
    assert shown and shown[0] in EXAMPLE.read_text(), "the page shows the example's code as the file has it"


def test_the_local_backend_runs_a_block_whole_before_a_step_the_spec_put_inside_it(tmp_path: Path) -> None:
    spec = il.spec(interleaved)
    assert [n.name for n in spec.nodes] == ["flag", "one", "after", "two"]
    assert [n.name for n in lower(spec).nodes()] == ["flag", "one", "two", "after"]
    r = il.run(interleaved, backend="local", workdir=tmp_path, raise_on_failure=False)
    # As on Flyte and KFP, the failure outside the block does not cut the block in two.
    assert {k: str(s.status) for k, s in r.steps.items()} == {
        "flag": "succeeded", "one": "succeeded", "two": "succeeded", "after": "failed"}
