"""Steps as a team ports them from flytekit or KFP: no retry policy, `retries=3` / `set_retry(3)`,
and the taxonomy spelled out. Compiled by the flyte and kfp tests, run by the shim tests."""

from __future__ import annotations

import interlock as il


@il.step
def plain(x: int) -> int:  # @task / a bare KFP component: never retried
    return x + 1


@il.step(retry=3)  # @task(retries=3) / task.set_retry(3)
def ported(x: int) -> int:
    return x * 2


@il.step(retry=il.Retry(3))
def ported_cls(x: int) -> int:
    return x - 1


@il.step(retry=il.Retry(transient=2, contention=il.Backoff(attempts=2, first="1m"), preempted=1))
def taxonomy(x: int) -> int:
    return x


@il.step(retry=il.Retry(transient=2))  # the shim retries in-process; no backend retry at all
def in_pod_only(x: int) -> bool:
    return x > 0


@il.pipeline(name="ported")
def ported_pipeline(x: int = 1):
    a = plain(x=x)
    b = ported(x=a)
    c = ported_cls(x=b)
    d = taxonomy(x=c)
    return in_pod_only(x=d)


@il.pipeline(name="ported-plain")
def plain_pipeline(x: int = 1):
    """No step retries through the backend: nothing needs durable run state."""
    return in_pod_only(x=plain(x=x))
