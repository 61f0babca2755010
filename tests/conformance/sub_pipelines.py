"""Pipelines that call other pipelines (sub-pipelines), in the shapes the issue names: the same
sub-pipeline twice with different inputs, nested two deep, a branch inside a sub-pipeline, a
map inside one, a sub-pipeline inside a branch, and a failing step inside one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import interlock as il
from interlock.core.dsl.branches import branch_value, otherwise
from interlock.core.dsl.finally_ import finally_
from interlock.core.model.finally_blocks import RunStatus


@il.step
def measure(text: str) -> int:
    return len(text)


@il.step
def scale(x: int, factor: int) -> int:
    return x * factor


@il.step
def label(x: int, prefix: str) -> str:
    return f"{prefix}:{x}"


@il.step
def total(xs: list[int]) -> int:
    return sum(xs)


@il.step
def split(text: str) -> list[str]:
    return text.split()


@il.step
def explode(x: int) -> int:
    raise ValueError(f"cannot handle {x}")


class Stats(NamedTuple):
    size: int
    tag: str


@il.pipeline(name="sub-prep")
def prep(text: str, factor: int = 2) -> Stats:
    """The sub-pipeline: two outputs, like a step returning a NamedTuple."""
    n = measure(text=text)
    big = scale(x=n, factor=factor)
    return Stats(big, label(x=big, prefix="prep"))


@il.pipeline(name="conf-sub-twice")
def twice(text: str = "hello", other: str = "sub pipelines"):
    """The same sub-pipeline called twice with different inputs; a step reads both."""
    a = prep(text=text)
    b = prep.named("prep-b")(text=other, factor=3)
    both = scale.named("both")(x=a.size, factor=b.size)
    return both, a.tag, b.tag


@il.pipeline(name="sub-middle")
def middle(text: str) -> int:
    s = prep(text=text, factor=10)
    return scale(x=s.size, factor=2)


@il.pipeline(name="conf-sub-nested")
def nested(text: str = "abc"):
    """A sub-pipeline inside a sub-pipeline: nodes are outer.inner.step."""
    m = middle(text=text)
    return label(x=m, prefix="nested")


@il.pipeline(name="sub-branchy")
def branchy(text: str, limit: int) -> str:
    n = measure(text=text)
    with il.when(n > limit):
        hi = label.named("long")(x=n, prefix="long")
    with otherwise():
        lo = label.named("short")(x=n, prefix="short")
    return branch_value(hi, lo)


@il.pipeline(name="conf-sub-branch")
def branch_inside(text: str = "hello world", limit: int = 5):
    """A branch (with its value as the sub-pipeline's output) inside a sub-pipeline."""
    return branchy(text=text, limit=limit)


@il.pipeline(name="sub-mapper")
def mapper(text: str) -> int:
    words = split(text=text)
    sizes = il.map(measure, over=words)
    return total(xs=sizes)


@il.pipeline(name="conf-sub-map")
def map_inside(text: str = "a bb ccc"):
    """A map inside a sub-pipeline."""
    return mapper(text=text)


@il.pipeline(name="conf-sub-in-branch")
def in_branch(text: str = "hello", go: bool = True):
    """A sub-pipeline inside an il.when block."""
    n = measure(text=text)
    with il.when(go):
        s = prep(text=text)
        label.named("after")(x=s.size, prefix="in")
    return n


@il.pipeline(name="sub-fails")
def failing(text: str) -> int:
    n = measure(text=text)
    return explode(x=n)


@il.pipeline(name="conf-sub-fails")
def fails_inside(text: str = "boom"):
    """A failing step inside a sub-pipeline fails the run; what follows does not run."""
    x = failing(text=text)
    return label(x=x, prefix="never")


@il.step
def notify(status: RunStatus) -> str:
    return status.status


@il.pipeline(name="sub-with-finally")
def with_finally(text: str) -> int:
    finally_(notify)
    return measure(text=text)


@il.pipeline(name="conf-sub-finally")
def finally_inside(text: str = "a"):
    """A finally inside a sub-pipeline: scoped to the call (tests/conformance/test_subpipeline_finally.py
    has the rest); its output is the pipeline's, which KFP does not declare (from inside an ExitHandler)."""
    return with_finally(text=text)


@dataclass
class Report:
    score: int
    name: str


@il.step
def report(x: int) -> Report:
    return Report(score=x * 3, name=f"r{x}")


@il.step
def ordered(msg: str) -> str:
    return msg


@il.step
def record(text: str) -> None:
    print(text)


@il.pipeline(name="sub-edges")
def edges(text: str, limit: int = 3):
    """Returns a dataclass output and a plain one; a block on one of its parameters."""
    n = measure(text=text)
    with il.when(limit > 2):
        ordered.named("gated")(msg=text)
    return report(x=n), n


@il.pipeline(name="sub-silent")
def silent(text: str):
    record(text=text)


@il.pipeline(name="conf-sub-edges")
def edge_cases(text: str = "abcd", limit: int = 3):
    """A field of a sub-pipeline's dataclass output read outside it, a sub-pipeline with no
    outputs, a gate outside on a sub-pipeline's output, a dataclass output as a pipeline output."""
    r, n = edges(text=text, limit=limit)
    silent(text=text)
    with il.when(n > 3):
        label.named("from-field")(x=n, prefix=r.name)
    return scale(x=n, factor=2), r


@il.pipeline(name="sub-sizes")
def sizes(text: str) -> list[int]:
    return il.map(measure, over=split(text=text))


@il.pipeline(name="conf-sub-map-out")
def map_out(text: str = "a bb ccc"):
    """A map's output (a list) returned by a sub-pipeline and read outside it."""
    got = sizes(text=text)
    return total(xs=got), got


@il.step(cache=il.Cache())
def slow_measure(text: str) -> int:
    return len(text)


@il.pipeline(name="sub-cached")
def cached_inner(text: str) -> int:
    return scale(x=slow_measure(text=text), factor=2)


@il.pipeline(name="conf-sub-cached")
def cached(text: str = "abc"):
    """A cached step inside a sub-pipeline: the second run hits it on every backend."""
    return cached_inner(text=text)
