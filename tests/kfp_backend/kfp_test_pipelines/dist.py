"""A distributed step on KFP: two CPU ranks (gloo) all-reduce a DataFrame column; an artifact in,
an artifact and a parameter out, across the launcher's hand-off."""

from __future__ import annotations

import os
from typing import NamedTuple

import pandas as pd

import interlock as il


def _first_time() -> bool:
    """With DIST_TEST_ONCE=<file>, fail only the first launch (the file marks it)."""
    flag = os.environ.get("DIST_TEST_ONCE")
    if not flag:
        return True
    if os.path.exists(flag):
        return False
    open(flag, "w").close()
    return True


class Reduced(NamedTuple):
    total: float
    metrics: il.Metrics


@il.step
def make_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"v": [float(i) for i in range(n)]})


# A step that declares no Retry is never retried (core/model/retry.py): the drills need the budgets.
@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo", timeout="45s"),
         retry=il.Retry(transient=1, preempted=1))
def allreduce(df: pd.DataFrame, base: float) -> Reduced:
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    if os.environ.get("DIST_TEST_FAIL_RANK") == str(rank) and _first_time():
        kind = os.environ.get("DIST_TEST_FAIL_KIND", "oom")
        if kind == "oom":
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if kind == "kill":  # a reclaimed node: no chance to record anything
            os.kill(os.getpid(), 9)
        if kind == "reset":
            raise ConnectionResetError("connection to the parameter store reset by peer")
        if kind == "stall":  # a straggler: its peer's collective times out
            import time

            time.sleep(float(os.environ.get("DIST_TEST_STALL_S", "60")))
    mine = df["v"].iloc[rank::world].sum()  # each rank its shard
    t = torch.tensor([float(mine) + base])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return Reduced(float(t.item()), il.Metrics(total=float(t.item()), world=float(world)))


@il.step
def report(total: float, metrics: il.Metrics) -> str:
    return f"total={total:g} world={metrics['world']:g}"


@il.pipeline(name="kfp-dist")
def dist_pipeline(n: int = 10, base: float = 1.0):
    out = allreduce(df=make_frame(n=n), base=base)
    return report(total=out.total, metrics=out.metrics)


# -- compile only: what a GPU cluster receives ------------------------------------------------
@il.step(
    distributed=il.Torchrun(nnodes=2, nproc_per_node=4),
    resources=il.Resources(
        cpu="16", memory="64Gi", gpu=4, accelerator="nvidia-h200", shared_memory="16Gi",
        tolerations=[il.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
        queue="team-a", priority_class="high",
    ),
    interruptible=True, timeout="6h", labels={"team": "fraud"}, env={"NCCL_DEBUG": "WARN"},
    secrets=[il.Secret(group="wandb", key="api-key")],
    retry=il.Retry(preempted=3, contention=3),  # undeclared, nothing is retried (core/model/retry.py)
)
def train_gpu(df: pd.DataFrame, epochs: int) -> il.Metrics:
    return il.Metrics(epochs=float(epochs))


@il.step(resources=il.Resources(gpu=1, queue="team-a"))
def evaluate_gpu(metrics: il.Metrics) -> float:
    return metrics["epochs"]


@il.pipeline(name="kfp-dist-gpu", labels={"project": "fraud"})
def gpu_pipeline(n: int = 10, epochs: int = 2):
    return evaluate_gpu(metrics=train_gpu(df=make_frame(n=n), epochs=epochs))


@il.step(distributed=il.Torchrun(nnodes=4, min_nodes=2, nproc_per_node=1))
def elastic(x: int) -> int:
    return x


@il.pipeline(name="kfp-dist-elastic")
def elastic_pipeline(x: int = 1):
    return elastic(x=x)


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2))  # NCCL, the default
def nccl_fit(x: int) -> int:
    return x


@il.pipeline(name="kfp-dist-nccl")
def nccl_pipeline(x: int = 1):
    return nccl_fit(x=x)
