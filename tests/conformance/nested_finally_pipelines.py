"""Pipelines with ``with il.finally_`` blocks nested in each other (Airflow's setup/teardown pairs
inside each other, Python's ``try``/``finally`` inside another): the inner teardown runs when the
inner block ends, the outer block goes on, then the outer teardown; each teardown sees its own
block's status and reads its own setup's output (tests/conformance/test_nested_finally.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import interlock as il
from conformance.finally_pipelines import prepare
from interlock.core.dsl.finally_ import finally_
from interlock.core.model.finally_blocks import RunStatus


@il.step
def create(name: str, fail: str = "") -> str:
    if fail == name:
        raise ValueError(f"cannot create {name}")
    return f"{name}-42"


@il.step
def delete(status: RunStatus, label: str, out: str, fail: str = "", resource: str | None = None) -> None:
    # What the teardown saw, written where the test reads it on every backend.
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{label}.json").write_text(json.dumps({
        "status": status.status, "failed_steps": status.failed_steps, "resource": resource}))
    if fail == f"{label}-teardown":
        raise RuntimeError(f"cannot delete {resource}")


drop = delete.named("drop-bucket")


@il.step
def work(x: int, fail: str, me: str) -> int:
    if fail == me:
        raise ValueError(f"{me} failed on {x}")
    return x * 2


FAILS = ("", "inner", "outer", "bucket", "inner-teardown")


@il.pipeline(name="conf-finally-nested")
def finally_nested(x: int = 1, fail: str = "", out: str = os.devnull):
    """A cluster (outer pair), a bucket inside it (inner pair), each teardown reading its own setup's
    output; ``fail`` names what fails: "inner" (the inner body), "outer" (the outer body after the
    inner block), "bucket" (the inner setup), "inner-teardown" or "" (nothing)."""
    y = prepare(x=x)
    with finally_(delete.named("drop-cluster"), label="outer", out=out) as cluster:
        c = create.named("make-cluster")(name="cluster")
        cluster.bind(resource=c)
        with finally_(drop, label="inner", out=out, fail=fail) as bucket:
            b = create.named("make-bucket")(name="bucket", fail=fail)
            bucket.bind(resource=b)
            z = work.named("inner-work")(x=y, fail=fail, me="inner")
        work.named("outer-work")(x=z, fail=fail, me="outer")
    return y


@il.pipeline(name="conf-finally-nested-plain")
def finally_nested_plain(x: int = 1, fail: str = "", out: str = os.devnull):
    """The same pairs, the teardowns reading parameters only (a Flyte failure node, a KFP exit task)."""
    y = prepare(x=x)
    with finally_(delete.named("drop-cluster"), label="outer", out=out):
        create.named("make-cluster")(name="cluster")
        with finally_(drop, label="inner", out=out, fail=fail):
            create.named("make-bucket")(name="bucket", fail=fail)
            z = work.named("inner-work")(x=y, fail=fail, me="inner")
        work.named("outer-work")(x=z, fail=fail, me="outer")
    return y


@il.pipeline(name="conf-finally-nested-sub")
def nested_sub(x: int, fail: str, out: str):
    """The nested pairs as a sub-pipeline's body: their scope is each call."""
    with finally_(delete.named("drop-cluster"), label="outer", out=out):
        create.named("make-cluster")(name="cluster")
        with finally_(drop, label="inner", out=out, fail=fail):
            create.named("make-bucket")(name="bucket", fail=fail)
            z = work.named("inner-work")(x=x, fail=fail, me="inner")
        return work.named("outer-work")(x=z, fail=fail, me="outer")


@il.pipeline(name="conf-finally-nested-call")
def finally_nested_call(x: int = 1, fail: str = "", out: str = os.devnull):
    """A call of the nested pairs (steps named ``env.<step>``), and a step after it."""
    y = prepare(x=x)
    z = nested_sub.named("env")(x=y, fail=fail, out=out)
    return prepare.named("after")(x=z)
