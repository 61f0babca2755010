"""The failure policy (``il.pipeline(failure_policy=...)``): after a step fails, the same steps run
on every backend, run after run. "stop" (the default) starts nothing new; "continue" runs every
step that does not depend on a failed one, as KFP and Flyte's FAIL_AFTER_EXECUTABLE_NODES_COMPLETE
do. Every finally step appears in RunResult.steps: with its status when its block was reached,
not-run when it was not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from backends import runnable_backends
from doc_blocks import first_block_after

import interlock as il
from conformance import policy_pipelines as pp
from interlock.core.base.errors import PipelineDefinitionError

BACKENDS = runnable_backends()
RUNS = 10  # kfp.local orders independent tasks differently from run to run: the same steps every time

S, F, NR, SK = "succeeded", "failed", "not-run", "skipped"

EXPECTED: dict[str, tuple[Any, dict[str, str]]] = {
    # Two independent chains that each fail (b_first is written first, so it runs before a_fails).
    "chains-stop": (pp.chains_stop, {"b_first": S, "a_fails": F, "a_next": NR, "b_fails": NR, "b_next": NR}),
    "chains-continue": (pp.chains_continue, {"b_first": S, "a_fails": F, "a_next": NR, "b_fails": F, "b_next": NR}),
    # Three sibling il.finally_ blocks, the first one's body fails.
    "blocks-stop": (pp.blocks_stop, {"f1": F, "c1": S, "s2": NR, "c2": NR, "s3": NR, "c3": NR}),
    "blocks-continue": (pp.blocks_continue, {"f1": F, "c1": S, "s2": S, "c2": S, "s3": S, "c3": S}),
    # A block and an il.when that read the failed step; independent work, a taken and a closed gate.
    "behind-stop": (pp.behind_stop, {"a_fails": F, "in_block": NR, "c_blocked": NR, "gated_on_failed": NR,
                                     "independent": NR, "gated": NR, "closed": NR}),
    "behind-continue": (pp.behind_continue, {"a_fails": F, "in_block": NR, "c_blocked": NR, "gated_on_failed": NR,
                                             "independent": S, "gated": S, "closed": SK}),
    # A sub-pipeline call with a failing step: its other step runs, but its outputs never leave it.
    "call-stop": (pp.call_stop, {"conf-policy-part.bad": F, "conf-policy-part.good": NR, "reads_good": NR,
                                 "beside": NR}),
    "call-continue": (pp.call_continue, {"conf-policy-part.bad": F, "conf-policy-part.good": S, "reads_good": NR,
                                         "beside": S}),
}
REPEATED = {"chains-stop", "chains-continue", "blocks-stop", "blocks-continue"}


def _run(pipeline: Any, backend: str, workdir: Path, out: Path) -> tuple[str, dict[str, str], dict[str, Any]]:
    params = {"out": str(out)} if pipeline.spec.param("out") is not None else {}
    r = il.run(pipeline, backend=backend, workdir=workdir, raise_on_failure=False, progress=False, **params)
    seen = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    return str(r.status), {k: str(s.status) for k, s in r.steps.items()}, seen


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(EXPECTED))
def test_the_same_steps_run_after_a_failure_on_every_backend(tmp_path: Path, backend: str, case: str) -> None:
    pipeline, expected = EXPECTED[case]
    for i in range(RUNS if case in REPEATED else 1):
        status, steps, _ = _run(pipeline, backend, tmp_path / f"w{i}", tmp_path / f"seen{i}")
        assert status == "failed", f"run {i}"
        assert steps == expected, f"run {i} on {backend}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_reached_finally_block_sees_its_own_status_under_continue(tmp_path: Path, backend: str) -> None:
    _, _, seen = _run(pp.blocks_continue, backend, tmp_path / "w", tmp_path / "seen")
    assert {k: (v["status"], v["failed_steps"]) for k, v in seen.items()} == {
        "c1": ("failed", ["f1"]), "c2": ("succeeded", []), "c3": ("succeeded", [])}
    _, _, seen = _run(pp.blocks_stop, backend, tmp_path / "w2", tmp_path / "seen2")
    assert list(seen) == ["c1"]  # the blocks the run never reached ran no finally step


def test_an_unknown_failure_policy_is_refused_when_the_pipeline_is_declared() -> None:
    with pytest.raises(PipelineDefinitionError, match="not a failure policy") as info:
        il.pipeline(name="bad-policy", failure_policy="ignore")(lambda: None)
    assert 'failure_policy="continue"' in (info.value.hint or "")


def test_the_policy_is_in_the_spec_and_survives_a_round_trip() -> None:
    spec = pp.chains_continue.spec
    assert spec.failure_policy == "continue" and pp.chains_stop.spec.failure_policy == "stop"
    assert il.PipelineSpec.loads(spec.dumps()) == spec
    assert "failure_policy" not in pp.chains_stop.spec.to_json()  # the default: specs as before


def test_flyte_compiles_the_policy_into_every_workflow() -> None:
    pytest.importorskip("flytekit")
    from flytekit.models.admin.workflow import WorkflowSpec

    from interlock.adapters.flyte.compile import serialize

    def policies(p: Any) -> set[int]:
        found = set()
        for m in serialize(p.spec, project="p", domain="d", version="v1", image="ghcr.io/acme/img:v1"):
            if isinstance(m, WorkflowSpec):
                idl = m.to_flyte_idl()  # the protobuf Flyte admin registers
                found |= {w.metadata.on_failure for w in (idl.template, *idl.sub_workflows)}
        return found

    from flytekit.core.workflow import WorkflowFailurePolicy

    assert policies(pp.call_continue) == {WorkflowFailurePolicy.FAIL_AFTER_EXECUTABLE_NODES_COMPLETE.value}
    assert policies(pp.call_stop) == {WorkflowFailurePolicy.FAIL_IMMEDIATELY.value}
    assert policies(pp.blocks_continue) == {WorkflowFailurePolicy.FAIL_AFTER_EXECUTABLE_NODES_COMPLETE.value}


def _doc_example() -> str:
    return first_block_after("docs/control-flow.md", "## After a failure: `failure_policy`")


def test_the_documented_example_runs_the_same_on_every_backend(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "two_parts_doc.py").write_text(_doc_example())
    monkeypatch.syspath_prepend(str(tmp_path))  # kfp-local's tasks import it by module name
    import two_parts_doc

    for backend in BACKENDS:
        r = il.run(two_parts_doc.two_parts, backend=backend, workdir=tmp_path / backend, raise_on_failure=False,
                   progress=False)
        assert {k: str(s.status) for k, s in r.steps.items()} == {
            "load_a": S, "publish_a": S, "load_b": F, "publish_b": NR, "audit": S}, backend
