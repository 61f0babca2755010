"""A step's Kueue queue on Flyte: labels on the task's pod template, in the registrable protobufs."""

from __future__ import annotations

from pathlib import Path

from backends import runnable_backends
from flyte_pipelines.queued import queued
from flyteidl.admin import task_pb2

import interlock as il

KUEUE = {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "high"}


def test_queue_and_priority_land_on_the_task_pods(tmp_path: Path) -> None:
    files = {f.name: f for f in il.compile(queued, backend="flyte", out=tmp_path, project="p", domain="d",
                                           version="v1", image="img:1")}

    def task(name: str) -> task_pb2.TaskSpec:
        [path] = [p for n, p in files.items() if n.endswith(f"_flyte-queued.{name}_1.pb")]
        msg = task_pb2.TaskSpec()
        msg.ParseFromString(path.read_bytes())
        return msg

    score = task("score").template
    assert dict(score.k8s_pod.metadata.labels) == {"team": "fraud", **KUEUE}
    # A kfpytorch task: the pod template is every rank's pod.
    train = task("train").template
    assert train.type == "pytorch"
    assert dict(train.k8s_pod.metadata.labels) == {"kueue.x-k8s.io/queue-name": "team-a"}


def test_capabilities_say_where_the_queue_lands() -> None:
    from interlock.core.backend.protocol import get_backend

    for name in ("flyte", "kfp"):
        assert "kueue.x-k8s.io/queue-name" in get_backend(name).capabilities().features["queue"]
    assert "TrainJob/PyTorchJob" in get_backend("kfp").capabilities().features["queue"]
    for name in runnable_backends():
        assert get_backend(name).capabilities().supports("queue")
