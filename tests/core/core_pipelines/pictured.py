"""A pipeline with one of everything a picture shows: GPU, spot, cache, retries, checkpoint,
timeout, a map, an il.when / elif / otherwise chain and a finally step."""

from __future__ import annotations

import interlock as il


@il.step(cache=il.Cache(version="3"))
def load(n: int) -> list[int]:
    return list(range(n))


@il.step(cache=il.Cache(enabled=False))
def uncached(xs: list[int]) -> int:
    return len(xs)


@il.step(
    resources=il.Resources(gpu=2, accelerator="nvidia-h200"),
    retry=il.Retry(transient=2, contention=il.Backoff(attempts=3, first="5m"), preempted=3),
    checkpoint=il.CheckpointPolicy(every="30m", keep=2),
    interruptible=True,
    timeout="2h",
)
def train(xs: list[int]) -> float:
    """Train on the list."""
    return float(sum(xs))


@il.step
def square(x: int) -> int:
    return x * x


@il.step
def total(parts: list[int]) -> int:
    return sum(parts)


@il.step
def big(score: float) -> str:
    return "big"


@il.step
def medium(score: float) -> str:
    return "medium"


@il.step
def small(score: float) -> str:
    return "small"


@il.step
def cleanup(status: il.RunStatus) -> str:
    return status.status


@il.pipeline(name="pictured")
def pictured(n: int = 4):
    """Everything the graph page draws."""
    il.finally_(cleanup)
    xs = load(n=n)
    uncached(xs=xs)
    score = train(xs=xs)
    total(parts=il.map(square, over=xs, concurrency=2))
    with il.when(score > 100.0):
        big(score=score)
    with il.elif_(score > 5.0):
        medium(score=score)
    with il.otherwise():
        small(score=score)
    return score
