"""A step's policies as the fields of its Argo template, and the manifest kinds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import argo_pipelines as ap
import pytest
import yaml

import interlock as il
from interlock.core.base.errors import PolicyError


def _compile(pipeline: il.Pipeline, out: Path, **options: Any) -> dict[str, Any]:
    [path] = il.compile(pipeline, backend="argo", out=out, image="registry.example/team:1", **options)
    return yaml.safe_load(path.read_text())


def _template(doc: dict[str, Any], name: str) -> dict[str, Any]:
    spec = doc["spec"].get("workflowSpec", doc["spec"])
    return next(t for t in spec["templates"] if t["name"] == name)


def test_a_schedule_gives_a_cron_workflow(tmp_path: Path) -> None:
    doc = _compile(ap.nightly, tmp_path)
    assert doc["kind"] == "CronWorkflow"
    assert doc["spec"]["schedules"] == ["0 3 * * *"]
    assert doc["spec"]["workflowSpec"]["entrypoint"] == "main"


def test_kind_template_gives_a_workflow_template(tmp_path: Path) -> None:
    doc = _compile(ap.chain, tmp_path, kind="template")
    assert doc["kind"] == "WorkflowTemplate" and doc["metadata"]["name"] == "argo-chain"


def test_contention_backs_off_natively_and_the_timeout_is_a_deadline(tmp_path: Path) -> None:
    t = _template(_compile(ap.nightly, tmp_path), "heavy")
    rs = t["retryStrategy"]
    assert rs["limit"] == 4
    assert rs["backoff"] == {"duration": "300s", "factor": 2, "cap": "3600s", "maxDuration": "21600s"}
    assert rs["expression"].endswith("in [82]")
    assert t["activeDeadlineSeconds"] == 2 * 3600 + 30


def test_shared_memory_secrets_and_kueue(tmp_path: Path) -> None:
    t = _template(_compile(ap.nightly, tmp_path), "heavy")
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in t["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in t["container"]["volumeMounts"]
    env = {e["name"]: e for e in t["container"]["env"]}
    assert env["WAREHOUSE_TOKEN"] == {"name": "WAREHOUSE_TOKEN",
                                      "valueFrom": {"secretKeyRef": {"name": "warehouse", "key": "token"}}}
    assert env["MODE"]["value"] == "batch"
    assert t["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert t["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    assert "schedulerName" not in t


def test_queue_volcano_sets_the_scheduler_and_the_queue_annotation(tmp_path: Path) -> None:
    t = _template(_compile(ap.nightly, tmp_path, queue="volcano"), "heavy")
    assert t["schedulerName"] == "volcano"
    assert t["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "team-a"
    assert t["priorityClassName"] == "high"
    assert "kueue.x-k8s.io/queue-name" not in t["metadata"].get("labels", {})


def test_an_unknown_option_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="queue"):
        _compile(ap.chain, tmp_path, queue="yunikorn")
