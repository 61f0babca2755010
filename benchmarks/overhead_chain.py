"""The kfp-local side's pipeline module for backend_overhead.py: a chain of N trivial steps.

Kept apart from the benchmark harness because every kfp-local task process imports the
module that defines its step, as a task imports a team's pipeline module: this one holds
what such a module holds (interlock, one step, one pipeline), not the harness's argparse,
statistics and subprocess imports, which kfp.local's native component (its source inlined)
never pays either. The size comes from INTERLOCK_BENCH_N, set by the harness.
"""

import os
from typing import Any

import interlock as il

SIZE_ENV = "INTERLOCK_BENCH_N"


@il.step(cache=il.Cache())
def inc(x: int) -> int:
    return x + 1


def make_pipeline(n: int, name: str = "overhead") -> Any:
    def body(x: int = 0):  # noqa: ANN202 - a pipeline body returns step outputs
        for i in range(n):
            x = inc.named(f"s{i}")(x=x)
        return x

    body.__module__ = __name__
    body.__name__ = body.__qualname__ = "bench"
    return il.pipeline(name=f"{name}-{n}")(body)


if os.environ.get(SIZE_ENV):
    bench = make_pipeline(int(os.environ[SIZE_ENV]))
