"""Small pipelines whose compiled containers the argo tests run as local processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

import interlock as il


@dataclass
class Summary:
    rows: int
    label: str


@il.step(cache=il.Cache())
def load(snapshot: str, n: int) -> pd.DataFrame:
    return pd.DataFrame({"x": list(range(n)), "snapshot": [snapshot] * n})


@il.step
def summarize(frame: pd.DataFrame, tag: str = "t") -> Summary:
    return Summary(rows=len(frame), label=f"{tag}:{frame['snapshot'].iloc[0]}")


@il.step
def double(rows: int) -> int:
    return rows * 2


@il.step
def shout(label: str, times: int) -> str:
    return label.upper() * times


@il.pipeline(name="argo-chain")
def chain(snapshot: str = "2026-11-01", n: int = 3):
    frame = load(snapshot=snapshot, n=n)
    s = summarize(frame=frame)
    d = double(rows=s.rows)
    with il.when(d > 4):
        shout(label=s.label, times=2)
    return d, s.label


@il.step(retry=il.Retry(transient=1, contention=il.Backoff(attempts=3, first="1m"), preempted=2))
def refuse(x: int) -> int:
    raise il.ValidationFailed(f"bad input {x}")


@il.pipeline(name="argo-fatal")
def fatal(x: int = 1):
    return refuse(x=x)


@il.step(resources=il.Resources(cpu="4", memory="8Gi", shared_memory="2Gi", queue="team-a", priority_class="high"),
         retry=il.Retry(contention=il.Backoff(attempts=4, first="5m", factor=2, max_delay="1h", max_total="6h")),
         timeout="2h", secrets=[il.Secret(group="warehouse", key="token")], env={"MODE": "batch"})
def heavy(x: int) -> int:
    return x


@il.pipeline(name="argo-nightly", schedule="0 3 * * *")
def nightly(x: int = 1):
    return heavy(x=x)


# -- distributed steps: a TrainJob resource template ----------------------------------------
@dataclass
class DdpConfig:
    scale: float
    note: str  # quotes and a newline: the manifest must survive Argo's substitution


class Reduced(NamedTuple):
    total: float
    shards: pd.DataFrame


@il.step
def frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"v": [float(i) for i in range(n)]})


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo", timeout="60s"),
         retry=il.Retry(transient=1, preempted=2))
def allreduce(df: pd.DataFrame, cfg: DdpConfig, tag: str) -> Reduced:
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(df["v"].iloc[rank::world].sum()) * cfg.scale])  # each rank its shard
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    shards = pd.DataFrame({"world": [world], "note": [cfg.note], "tag": [tag]})
    return Reduced(float(t.item()), shards)


@il.step
def describe(total: float, shards: pd.DataFrame) -> str:
    return f"total={total:g} world={shards['world'].iloc[0]} tag={shards['tag'].iloc[0]} note={shards['note'].iloc[0]}"


@il.pipeline(name="argo-ddp")
def ddp(n: int = 10, cfg: DdpConfig = DdpConfig(2.0, 'say "hi"\nbye'), tag: str = "it's"):  # noqa: B008
    out = allreduce(df=frame(n=n), cfg=cfg, tag=tag)
    return describe(total=out.total, shards=out.shards)


@il.step(
    distributed=il.Torchrun(nnodes=2, nproc_per_node=2),
    resources=il.Resources(
        cpu="8", memory="32Gi", gpu=2, accelerator="nvidia-h200", shared_memory="8Gi",
        tolerations=[il.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")], queue="team-a",
    ),
    interruptible=True, timeout="2h", labels={"team": "fraud"}, env={"NCCL_DEBUG": "WARN"},
    secrets=[il.Secret(group="wandb", key="api-key")],
    retry=il.Retry(transient=1, preempted=3, contention=il.Backoff(attempts=2, first="1m")),
)
def train_gpu(df: pd.DataFrame, epochs: int) -> il.Metrics:
    return il.Metrics(epochs=float(epochs))


@il.step
def evaluate_gpu(metrics: il.Metrics) -> float:
    return metrics["epochs"]


@il.pipeline(name="argo-ddp-gpu", labels={"project": "fraud"})
def ddp_gpu(n: int = 10, epochs: int = 2):
    return evaluate_gpu(metrics=train_gpu(df=frame(n=n), epochs=epochs))
