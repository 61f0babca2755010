"""Ported from the KFP v2 docs sample "Parallel looping" with ``dsl.Collected``
(kubeflow/pipelines, sdk test data ``pipeline_with_parallelfor_collected`` / the
"Control flow" user guide): add ``y`` to every number in a ParallelFor, then sum the
collected results.

Original (KFP)::

    with dsl.ParallelFor(nums, parallelism=2) as n:
        t = add(x=n, y=y)
    return sum_numbers(nums=dsl.Collected(t.output)).output

    python -m docs.examples.parallelfor_collected     # runs on local, flyte-local, kfp-local
"""

import interlock as il


@il.step
def add(x: float, y: float) -> float:
    return x + y


@il.step
def sum_numbers(nums: list[float]) -> float:
    return sum(nums)


@il.pipeline(name="ex-parallelfor-collected")
def add_pipeline(nums: list[float] = [1.0, 2.0, 3.0], y: float = 1.0):  # noqa: B006 - a recorded default
    added = il.map(add, over=nums, y=y, concurrency=2)
    return sum_numbers(nums=added)


EXPECTED = {"o0": 9.0}

if __name__ == "__main__":
    for backend in ("local", "flyte-local", "kfp-local"):
        print(backend, il.run(add_pipeline, backend=backend).outputs)
