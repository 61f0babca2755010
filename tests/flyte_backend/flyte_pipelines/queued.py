"""Steps drawing on a team's Kueue queue: a plain GPU step and a distributed one."""

from __future__ import annotations

import interlock as il

GPU = il.Resources(gpu=1, queue="team-a", priority_class="high")


@il.step(resources=GPU, labels={"team": "fraud"})
def score(x: int) -> int:
    return x


@il.step(distributed=il.Torchrun(nnodes=2, nproc_per_node=4), resources=il.Resources(gpu=4, queue="team-a"))
def train(x: int) -> int:
    return x


@il.pipeline(name="flyte-queued")
def queued(x: int = 1):
    return train(x=score(x=x))
