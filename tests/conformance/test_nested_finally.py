"""``with il.finally_`` blocks nested in each other (issue 31, Airflow's nested setup/teardown):
the inner teardown runs as the inner block ends and sees the inner block's status, the outer block
goes on (what reads the inner block waits for its teardown), then the outer teardown sees the
outer block's status, the inner block and its teardown included; each teardown reads its own
setup's output where the backend can. The same statuses and RunStatus on every backend that runs
them; each backend's compile renders the nesting natively."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from backends import runnable_backends

import interlock as il
from conformance import nested_finally_pipelines as nfp
from interlock.core.backend.protocol import features_used
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.finally_ import finally_

NESTED = runnable_backends("finally.block.nested")
READS = runnable_backends("finally.block.nested", "finally.block.reads_output")


def _run(pipeline: Any, backend: str, tmp_path: Path, **params: Any) -> tuple[Any, ...]:
    out = tmp_path / f"seen-{backend}"
    r = il.run(pipeline, backend=backend, workdir=tmp_path / backend, raise_on_failure=False, out=str(out), **params)
    seen = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, seen


# What each case gives on every backend: the run's status, the steps that did not succeed, and
# what each teardown saw (its block's status and failed steps).
EXPECTED: dict[str, tuple[str, dict[str, str], dict[str, tuple[str, list[str]]]]] = {
    "": ("succeeded", {}, {"inner": ("succeeded", []), "outer": ("succeeded", [])}),
    "inner": ("failed", {"inner-work": "failed", "outer-work": "not-run"},
              {"inner": ("failed", ["inner-work"]), "outer": ("failed", ["inner-work"])}),
    "outer": ("failed", {"outer-work": "failed"}, {"inner": ("succeeded", []), "outer": ("failed", ["outer-work"])}),
    "bucket": ("failed", {"make-bucket": "failed", "inner-work": "not-run", "outer-work": "not-run"},
               {"inner": ("failed", ["make-bucket"]), "outer": ("failed", ["make-bucket"])}),
    # The inner teardown failed: the outer block goes no further, and its teardown sees why.
    "inner-teardown": ("failed", {"drop-bucket": "failed", "outer-work": "not-run"},
                       {"inner": ("succeeded", []), "outer": ("failed", ["drop-bucket"])}),
}


def _check(got: tuple[Any, ...], fail: str) -> None:
    status, steps, seen = got
    want_status, not_ok, teardowns = EXPECTED[fail]
    assert status == want_status
    assert {k: v for k, v in steps.items() if v != "succeeded"} == not_ok
    assert steps["drop-bucket"] == ("failed" if fail == "inner-teardown" else "succeeded")
    assert steps["drop-cluster"] == "succeeded"
    assert {k: (v["status"], v["failed_steps"]) for k, v in seen.items()} == teardowns


@pytest.mark.parametrize("fail", nfp.FAILS, ids=[f or "none" for f in nfp.FAILS])
def test_nested_blocks_each_teardown_sees_its_block_on_every_backend(tmp_path: Path, fail: str) -> None:
    results = {b: _run(nfp.finally_nested_plain, b, tmp_path, fail=fail) for b in NESTED}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    _check(results["local"], fail)


@pytest.mark.parametrize("fail", ["", "bucket", "inner-teardown"], ids=["none", "bucket", "inner-teardown"])
def test_nested_teardowns_read_their_own_setup(tmp_path: Path, fail: str) -> None:
    results = {b: _run(nfp.finally_nested, b, tmp_path, fail=fail) for b in READS}
    for backend, got in results.items():
        assert got == results["local"], f"{backend} differs from local"
    _check(results["local"], fail)
    seen = results["local"][2]
    assert seen["outer"]["resource"] == "cluster-42"
    assert seen["inner"]["resource"] == (None if fail == "bucket" else "bucket-42")


def test_nesting_is_a_feature_of_its_own() -> None:
    assert features_used(il.spec(nfp.finally_nested_plain))["finally.block.nested"] == ["drop-bucket"]


def test_nested_blocks_in_a_when_block_are_refused_with_where_to_write_them() -> None:
    def in_when(x: int = 1):
        y = nfp.prepare(x=x)
        with finally_(nfp.delete.named("a"), label="a", out="o"):
            with il.when(y > 1):
                with finally_(nfp.drop, label="b", out="o"):
                    nfp.create(name="c")

    with pytest.raises(PipelineDefinitionError, match="inside an il.when block") as info:
        il.spec(il.pipeline(name="nested-in-when")(in_when))
    assert "top level" in (info.value.hint or "")
