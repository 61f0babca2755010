"""A distributed step on KFP: two CPU ranks (gloo) all-reduce a DataFrame column; an artifact in,
an artifact and a parameter out, across the launcher's hand-off."""

from __future__ import annotations

import os
from typing import NamedTuple

import pandas as pd

import interlock as il


class Reduced(NamedTuple):
    total: float
    metrics: il.Metrics


@il.step
def make_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"v": [float(i) for i in range(n)]})


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo"))
def allreduce(df: pd.DataFrame, base: float) -> Reduced:
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    if os.environ.get("DIST_TEST_FAIL_RANK") == str(rank):
        kind = os.environ.get("DIST_TEST_FAIL_KIND", "oom")
        if kind == "oom":
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if kind == "kill":
            os.kill(os.getpid(), 9)
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
