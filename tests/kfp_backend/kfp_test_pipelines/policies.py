"""A pipeline that uses every policy the KFP adapter maps (compiled, not run)."""

from __future__ import annotations

import interlock as il


@il.step(
    resources=il.Resources(cpu="2", memory="4Gi", cpu_limit="4", memory_limit="8Gi"),
    cache=il.Cache(version="v1"),
    retry=il.Retry(transient=2, contention=il.Backoff(attempts=3, first="5m", factor=2.0, max_delay="30m"), preempted=2),
    env={"LOG_LEVEL": "info"},
)
def prepare(snapshot: str) -> str:
    return f"prepared {snapshot}"


@il.step(
    resources=il.Resources(
        cpu="8", memory="32Gi", gpu=2, accelerator="nvidia-h200", shared_memory="8Gi",
        node_selector={"pool": "gpu"},
        tolerations=[il.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
    ),
    retry=il.Retry(transient=1, contention=il.Backoff(attempts=4, first="5m"), preempted=5),
    checkpoint=il.CheckpointPolicy(every="30m", keep=2),
    interruptible=True,
    timeout="6h",
    labels={"team": "fraud", "cost-center": "ml-42"},
    annotations={"example.com/owner": "fraud-ml"},
    secrets=[il.Secret(group="wandb", key="api-key", env="WANDB_API_KEY"), il.Secret(group="s3-creds", key="secret")],
)
def train(data: str) -> float:
    return 0.9


@il.step(retry=il.Retry(transient=0, contention=None, preempted=0))
def gate(score: float, threshold: float) -> bool:
    return score > threshold


@il.step
def publish(score: float) -> str:
    return f"published {score}"


@il.pipeline(name="kfp-policies", labels={"project": "fraud"})
def policies(snapshot: str = "2026-11-01", threshold: float = 0.5):
    data = prepare(snapshot=snapshot)
    score = train(data=data)
    with il.when(gate(score=score, threshold=threshold)):
        publish(score=score)
