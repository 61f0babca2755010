"""A distributed step: two CPU processes (gloo) all-reduce their ranks."""

from __future__ import annotations

import interlock as il


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="gloo"))
def allreduce(base: float) -> float:
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    t = torch.tensor([base + rank])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item()) * 10 + dist.get_world_size()


@il.pipeline(name="flyte-dist")
def dist_pipeline(base: float = 1.0):
    return allreduce(base=base)


@il.step(distributed=il.Torchrun(nnodes=4, nproc_per_node=1))
def fixed_world(x: int) -> int:
    return x


@il.step(distributed=il.Torchrun(nnodes=4, min_nodes=2, nproc_per_node=8), resources=il.Resources(gpu=8, accelerator="nvidia-h100"))
def elastic_world(x: int) -> int:
    return x


@il.pipeline(name="flyte-dist-shapes")
def dist_shapes(x: int = 1):
    return elastic_world(x=fixed_world(x=x))
