"""Pipelines with join rules (``run_if=``), steps that skip themselves (``il.Skip``) and a
teardown that reads its setup's output: the same statuses and outputs on every backend that
runs them (tests/conformance/test_joins.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import interlock as il
from interlock.core.dsl.finally_ import finally_

RULES = ("none_failed", "all_succeeded", "any_succeeded", "one_succeeded", "all_done")


@il.step
def positive(x: int) -> bool:
    return x > 0


@il.step
def left(x: int) -> int:
    return x + 1


@il.step
def right(x: int) -> int:
    return x - 1


@il.step
def boom(x: int) -> int:
    raise ValueError(f"boom {x}")


@il.step
def joined(a: int | None = None, b: int | None = None) -> str:
    return f"{a}/{b}"


@il.step
def mark() -> str:
    return "ran"


@il.step(may_skip=True)
def small(x: int) -> int:
    if x > 5:
        raise il.Skip(f"{x} is too big")
    return x


@il.step
def plus(v: int) -> int:
    return v + 100


@il.pipeline(name="conf-join-branch")
def join_branch(x: int = 1):
    """The usual join after an if/else: one branch ran, none failed."""
    with il.when(positive(x=x)):
        a = left(x=x)
    with il.otherwise():
        b = right(x=x)
    return joined(a=a, b=b, run_if="any_succeeded")


@il.pipeline(name="conf-join-rules")
def join_rules(x: int = 1):
    """One join per rule after a block that runs only for a positive x (after=, no data)."""
    with il.when(positive(x=x)):
        a = left(x=x)
    for rule in RULES:
        mark.named(f"after-{rule.replace('_', '-')}")(after=[a], run_if=rule)


@il.pipeline(name="conf-join-output")
def join_output(x: int = 1):
    """A pipeline output made by a join whose rule may not be met (no upstream succeeded): None then."""
    with il.when(positive(x=x)):
        a = left(x=x)
    return joined(a=a, run_if="any_succeeded")


@il.pipeline(name="conf-join-failed", failure_policy="continue")
def join_failed(x: int = 1):
    """One join per rule after a step that succeeded and one that failed."""
    a = left(x=x)
    b = boom(x=x)
    for rule in RULES:
        mark.named(f"after-{rule.replace('_', '-')}")(after=[a, b], run_if=rule)
    joined.named("all-done-reads")(a=a, b=b, run_if="all_done")


@il.pipeline(name="conf-join-failed-stop")
def join_failed_stop(x: int = 1):
    """As conf-join-failed, under failure_policy="stop": a failure starts nothing, whatever the rule."""
    a = left(x=x)
    b = boom(x=x)
    mark.named("after-all-done")(after=[a, b], run_if="all_done")


@il.pipeline(name="conf-self-skip")
def self_skip(x: int = 1):
    """A step that skips itself for x > 5, and what reads it under each kind of rule."""
    s = small(x=x)
    p = plus(v=s)  # the default rule: skipped with it
    plus.named("reads-reader")(v=p)  # and so on down the line
    mark.named("only-after")(after=[s])  # none_failed on after= only: a skipped upstream is fine
    mark.named("all-succeeded")(after=[s], run_if="all_succeeded")
    return joined.named("done")(a=s, run_if="all_done")


@il.step
def summed(parts: list[int | None]) -> int:
    return sum(p for p in parts if p is not None)


@il.pipeline(name="conf-skip-map")
def skip_map(xs: list[int] = [1, 9, 3]):  # noqa: B006 - recorded, never mutated
    """Items that skip themselves: None in the gathered list."""
    from interlock.core.dsl.fanout import map as il_map

    parts = il_map(small, over=xs)
    return parts, summed(parts=parts)


@il.step
def create(name: str, fail: bool = False) -> str:
    if fail:
        raise RuntimeError(f"could not create {name}")
    return f"cluster-{name}"


@il.step
def use(cluster: str, fail: bool = False) -> int:
    if fail:
        raise ValueError(f"job on {cluster} failed")
    return len(cluster)


@il.step
def teardown(label: str, out: str, cluster_id: str | None = None) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{label}.json").write_text(json.dumps({"cluster_id": cluster_id}))


@il.pipeline(name="conf-teardown-block")
def teardown_block(fail_setup: bool = False, fail_job: bool = False, out: str = os.devnull):
    """Setup, work and teardown (Airflow's setup/teardown tasks): the teardown deletes what the
    setup created, and gets None when the setup failed before creating it."""
    before = left(x=1)
    with finally_(teardown, label="block", out=out) as block:
        c = create(name="a", fail=fail_setup)
        block.bind(cluster_id=c)
        n = use(cluster=c, fail=fail_job)
    return before, n


@il.pipeline(name="conf-teardown-run")
def teardown_run(fail_setup: bool = False, out: str = os.devnull):
    """The whole pipeline's finally step reads the setup's output."""
    c = create(name="b", fail=fail_setup)
    finally_(teardown, label="run", out=out, cluster_id=c)
    return use(cluster=c)
