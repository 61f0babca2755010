"""Pipelines with il.when blocks in the shapes that broke: nested blocks whose true branch is
not the first, sibling blocks holding chains, conditions produced inside an outer block."""

from __future__ import annotations

from typing import NamedTuple

import interlock as il

# il.elif_, il.otherwise, il.branch_value once they are exported from interlock
from interlock.core.dsl.branches import branch_value, elif_, otherwise


@il.step
def is_above(x: float, limit: float) -> bool:
    return x > limit


@il.step
def tag(label: str, x: float) -> str:
    return f"{label}:{x}"


@il.step
def extend(text: str, more: str) -> str:
    return f"{text}+{more}"


@il.step
def fail_with(reason: str) -> str:
    raise ValueError(reason)


@il.pipeline(name="conf-nested-last")
def nested_last(x: float = 3.0):
    """Three levels deep; at each level the block whose condition holds comes last."""
    with il.when(is_above.named("outer")(x=x, limit=0.0)):
        with il.when(is_above.named("l2-first")(x=x, limit=100.0)):
            tag.named("l2-first-body")(label="never", x=x)
        with il.when(is_above.named("l2-last")(x=x, limit=1.0)):
            with il.when(is_above.named("l3-first")(x=x, limit=50.0)):
                tag.named("l3-first-body")(label="never", x=x)
            with il.when(is_above.named("l3-last")(x=x, limit=2.0)):
                deep = tag.named("l3-last-body")(label="deep", x=x)
                extend.named("l3-last-more")(text=deep, more="x")
            tag.named("l2-after")(label="after-l3", x=x)
        tag.named("l1-after")(label="after-l2", x=x)
    return tag.named("final")(label="end", x=x)


@il.pipeline(name="conf-nested-guard")
def nested_guard(radius: float = 0.95):
    """Flyte's nested conditions: a guard in the second nested block must fail the run."""
    with il.when(is_above.named("positive")(x=radius, limit=0.0)):
        with il.when(is_above.named("big")(x=radius, limit=1.0)):
            tag.named("big-area")(label="big", x=radius)
        with il.when(is_above.named("small")(x=radius, limit=0.5)):
            fail_with(reason="radius between 0.5 and 1.0 is not supported")
    return tag.named("done")(label="done", x=radius)


@il.pipeline(name="conf-sibling-chains")
def sibling_chains(x: float = 3.0):
    """Two sibling blocks, each a chain of steps; the second reads the first's condition."""
    high = is_above.named("high")(x=x, limit=2.0)
    low = is_above.named("low")(x=x, limit=10.0)
    with il.when(high):
        a = tag.named("high-tag")(label="high", x=x)
        a2 = extend.named("high-more")(text=a, more="1")
        extend.named("high-most")(text=a2, more="2")
    with il.when(low):
        b = tag.named("low-tag")(label="low", x=x)
        extend.named("low-more")(text=b, more="1")
    return tag.named("end")(label="end", x=x)


@il.pipeline(name="conf-inner-condition")
def inner_condition(x: float = 3.0):
    """A nested gate whose condition is produced inside the outer block, after a chain."""
    with il.when(is_above.named("outer")(x=x, limit=1.0)):
        t = tag.named("first")(label="a", x=x)
        extend.named("second")(text=t, more="b")
        with il.when(is_above.named("inner")(x=x, limit=2.0)):
            u = tag.named("inner-first")(label="c", x=x)
            extend.named("inner-second")(text=u, more="d")
        tag.named("outer-last")(label="e", x=x)
    return tag.named("end")(label="end", x=x)


# -- conditions as expressions over outputs and parameters -----------------------------------------
@il.step
def count(n: int) -> int:
    return n


@il.step
def flip(label: str) -> str:
    return label


@il.step
def shout(text: str) -> str:
    return text.upper()


@il.pipeline(name="conf-expressions")
def expressions(n: int = 7, label: str = "heads", go: bool = True):
    c = count(n=n)
    f = flip(label=label)
    other = count.named("other")(n=3)
    with il.when((c > 5) & (f == "heads")):
        shout.named("both")(text="both")
    with il.when(~(c > 5)):
        shout.named("small")(text="small")
    with il.when(c > other):
        shout.named("more-than-other")(text="more")
    with il.when(go & (f != "tails")):
        shout.named("go-not-tails")(text="go")
    with il.when(~go):
        shout.named("stopped")(text="stopped")
    with il.when((3 <= c) & (c != other) & ~(f == "tails")):
        shout.named("three-terms")(text="three")
    return c


@il.pipeline(name="conf-expressions-or")
def expressions_or(n: int = 7, label: str = "tails"):
    c = count(n=n)
    f = flip(label=label)
    with il.when((c < 3) | (f == "heads")):
        shout.named("either")(text="either")
    with il.when(~((c < 3) | (f == "heads"))):
        shout.named("neither")(text="neither")
    return f


# -- a cached step called twice with the same inputs in one run -------------------------------------
@il.step(cache=il.Cache(version="1"))
def cached_double(x: float) -> float:
    return x * 2


@il.pipeline(name="conf-twice")
def twice(x: float = 1.5):
    a = cached_double(x=x)
    b = cached_double.named("again")(x=x)
    return extend(text=tag(label="a", x=a), more=tag.named("tag-b")(label="b", x=b))


# -- elif / otherwise and branch values --------------------------------------------------------------
@il.step
def area(radius: float, scale: float) -> float:
    return round(3.14159 * radius * radius * scale, 4)


@il.pipeline(name="conf-branch-value")
def branch_value_pipeline(radius: float = 3.0):
    """A chain with a value assigned in every branch, used after it and returned."""
    with il.when(radius > 10.0):
        big = area.named("big-area")(radius=radius, scale=1.0)
    with elif_(radius > 2.0):
        mid = area.named("mid-area")(radius=radius, scale=2.0)
    with elif_(radius > 1.0):
        small = area.named("small-area")(radius=radius, scale=3.0)
    with otherwise():
        tiny = area.named("tiny-area")(radius=radius, scale=4.0)
    value = branch_value(big, mid, small, tiny)
    return value, tag(label="area", x=value)


@il.pipeline(name="conf-chain-nested")
def chain_nested(n: int = 4, label: str = "tails"):
    """A chain inside a block, headed by a bool output, with no otherwise; its value is used
    inside the outer block; a chain on a parameter with a value returned."""
    c = count(n=n)
    with il.when(c > 0):
        with il.when(is_above.named("over-three")(x=c, limit=3.0)):
            shout.named("over")(text="over")
        with elif_(c == 3):
            shout.named("exactly")(text="three")
        with il.when(flip(label=label) == "heads"):
            h = shout.named("say-heads")(text="heads")
        with otherwise():
            t = tag.named("say-tails")(label="tails", x=c)
        extend.named("side")(text=branch_value(h, t), more="!")
    with il.when(c > 100):
        shout.named("huge")(text="huge")
    with elif_(c > 10):
        shout.named("large")(text="large")
    return c


class Pair(NamedTuple):
    total: int
    label: str
    ratio: float


@il.step
def pair(n: int) -> Pair:
    return Pair(n, "heads" if n % 2 else "tails", n / 4)


@il.pipeline(name="conf-expr-named")
def expr_named(n: int = 5):
    """Comparisons on NamedTuple outputs (not KFP's single "Output")."""
    p = pair(n=n)
    with il.when((p.total > 3) & (p.label == "heads")):
        shout.named("odd-big")(text="yes")
    with il.when(p.ratio <= 1.0):
        shout.named("small-ratio")(text="small")
    return p.label


@il.pipeline(name="conf-value-later")
def value_later(radius: float = 3.0, go: bool = True):
    """A branch value read inside a later, unrelated block and returned."""
    with il.when(radius > 2.0):
        a = area.named("a1")(radius=radius, scale=1.0)
    with otherwise():
        b = area.named("a2")(radius=radius, scale=2.0)
    v = branch_value(a, b)
    with il.when(go):
        tag.named("inside")(label="v", x=v)
    return v


@il.pipeline(name="conf-nested-value")
def nested_value(x: float = 3.0):
    """The value of a chain nested in the outer chain's last block is that block's value."""
    big = is_above.named("is-big")(x=x, limit=10.0)
    with il.when(big):
        b = tag.named("big-tag")(label="big", x=x)
    with otherwise():
        with il.when(is_above.named("is-mid")(x=x, limit=1.0)):
            m = tag.named("mid-tag")(label="mid", x=x)
        with otherwise():
            t = tag.named("tiny-tag")(label="tiny", x=x)
        inner = branch_value(m, t)
        extend.named("inner-use")(text=inner, more="in")
    value = branch_value(b, inner)
    return value, extend.named("outer-use")(text=value, more="out")


@il.step
def doubled(x: int) -> int:
    return 2 * x


@il.step
def tripled(x: int) -> int:
    return 3 * x


@il.step
def summed(parts: list[int]) -> int:
    return sum(parts)


@il.pipeline(name="branch-value-of-maps")
def branch_value_of_maps(xs: list[int] = [1, 2, 3], big: bool = True) -> int:  # noqa: B006 - never mutated
    """il.branch_value over two il.map outputs (issue 31 item 2: KFP's dsl.OneOf refused a
    ParallelFor's Collected)."""
    with il.when(big):
        a = il.map(tripled, over=xs)
    with il.otherwise():
        b = il.map(doubled, over=xs)
    return summed(parts=il.branch_value(a, b))


@il.step
def note(tag: str) -> str:
    return tag


@il.step
def tidy() -> None:
    return None


@il.pipeline(name="after-into-blocks")
def after_into_blocks(go: bool = True) -> str:
    """``after=`` from a step inside an il.when block and inside an il.finally_ block to a step
    outside them (three Airflow ports; issue 31 item 2: KFP compiled them, this checks every
    backend runs them alike)."""
    first = note(tag="first")
    with il.when(go):
        inside = note.named("inside")(tag="inside", after=[first])
    with il.otherwise():
        other = note.named("other")(tag="other", after=[first])
    with il.finally_(tidy):
        note.named("held")(tag="held", after=[first])
    return il.branch_value(inside, other)
