"""docs/argo.md shows the template the compiler writes for the fraud pipeline's train step."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import interlock as il
from reference_pipelines.fraud_retrain import fraud_retrain

DOC = Path(__file__).resolve().parents[2] / "docs" / "argo.md"


def _fingerprints_out(text: str) -> str:
    return re.sub(r"\b[0-9a-f]{16}(?:[0-9a-f]{48})?\b", "FINGERPRINT", text)  # the code's, changes with it


def test_argo_md_shows_what_the_compiler_writes_for_train(tmp_path: Path) -> None:
    [shown] = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    [path] = il.compile(fraud_retrain, backend="argo", out=tmp_path, image="registry.example/fraud:1",
                        state_pvc="interlock-runs", accelerator_label="cloud.google.com/gke-accelerator",
                        spot_selector="cloud.google.com/gke-spot=true", spot_toleration="cloud.google.com/gke-spot=true")
    workflow = yaml.safe_load(path.read_text())["spec"]["workflowSpec"]  # the weekly refresh's CronWorkflow
    train = next(t for t in workflow["templates"] if t["name"] == "train")
    assert _fingerprints_out(shown) == _fingerprints_out(yaml.safe_dump(train, sort_keys=False, width=120))
