"""flyte2 compile time grows linearly with the steps and blocks (the figures at 50 to 2,000
steps come from `python benchmarks/flyte2_compile.py`)."""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from pathlib import Path

import pytest

import interlock as il
from interlock.adapters.flyte2.compile import compile_to

pytestmark = pytest.mark.perf

EXPONENT_BOUND = 1.5  # as tests/perf/test_compile_growth.py: linear work measures 1.0-1.2


@il.step
def add(a: int, b: int) -> int:
    return a + b


@il.step
def positive(a: int) -> bool:
    return a > 0


def blocks(n: int) -> il.PipelineSpec:
    """n il.when blocks in a row, each gated on a step and followed by a step outside it."""

    def body(x: int = 1):  # noqa: ANN202 - a pipeline body returns step outputs
        prev = add(a=x, b=x)
        for _ in range(n):
            with il.when(positive(a=prev)):
                add(a=prev, b=prev)
            prev = add(a=prev, b=x)
        return prev

    body.__module__ = __name__
    return dataclasses.replace(il.spec(il.pipeline(name=f"f2-blocks-{n}")(body)), ref=f"{__name__}:blocks")


def test_flyte2_compile_grows_linearly(tmp_path: Path) -> None:
    specs = {n: blocks(n) for n in (40, 160)}
    compile_to(specs[40], tmp_path / "warm", image="img:1", store="/mnt/il")  # first-call imports
    best = {n: math.inf for n in specs}
    for attempt in range(3):  # a busy neighbour inflates a point: measure again, keeping the best, before failing
        for _ in range(3 + attempt):
            for n, spec in specs.items():
                gc.collect()
                t0 = time.process_time()  # CPU seconds: steadier than wall time on a shared machine
                compile_to(spec, tmp_path / f"f2-{n}", image="img:1", store="/mnt/il")
                best[n] = min(best[n], time.process_time() - t0)
        e = math.log(best[160] / best[40]) / math.log(4)
        if e < EXPONENT_BOUND:
            break
    assert e < EXPONENT_BOUND, f"flyte2 compile grows as size^{e:.2f}: {best}"
