"""The receipt and the run report keep what a run decided (each gate) and returned (the
pipeline's outputs), the same on every backend (issue 25, item 13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import runnable_backends

import interlock as il
from conformance import outcome_pipelines as op
from interlock.core.record.run_outputs import summarize
from interlock.core.report.report_html import write_report

BACKENDS = runnable_backends()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("score", "held"), [(0.9, True), (0.1, False)])
def test_the_receipt_keeps_the_gate_decision_and_the_outputs(tmp_path: Path, backend: str, score: float, held: bool) -> None:
    result = il.run(op.gated_outcome, backend=backend, workdir=tmp_path, score=score)
    assert result.succeeded
    receipt = json.loads(Path(result.receipt_path or "").read_text())
    assert receipt["outputs"] == {"o0": held, "o1": f"score {score} against bar 0.5", "o2": score}
    [gate] = receipt["gates"]
    assert gate["condition"] == "judge.promote" and gate["held"] is held
    page = write_report(Path(result.receipt_path or "").parent).read_text()
    assert "<h2>Outcome</h2>" in page and ("did not hold" in page) is (not held)
    assert f"score {score} against bar 0.5" in page


def test_values_the_receipt_cannot_hold_as_they_are() -> None:
    import pandas as pd

    assert summarize(float("nan")) == "NaN" and summarize(float("-inf")) == "-Infinity"  # JSON has neither
    assert summarize(op.Verdict(True, "ok", 1.0)) == {"promote": True, "reason": "ok", "score": 1.0}
    frame = pd.DataFrame({"a": [1, 2, 3], "b": [0.1, 0.2, 0.3]})
    assert summarize(frame) == {"type": "DataFrame", "rows": 3, "columns": ["a", "b"]}  # never the rows
    assert summarize(il.Model("/models/m1")) == {"type": "Model", "path": "/models/m1"}
    assert summarize(list(range(150))) == {"items": list(range(100)), "more": 50}
