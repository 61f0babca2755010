"""Ported from the Flyte example "Map tasks" (flyteorg/flytesnacks, examples/advanced_composition
``map_task.py``): detect anomalies in a list of data points with ``map_task`` and a bound
(``functools.partial``) threshold, with a concurrency limit; then count them.

Original (Flyte)::

    @task
    def detect_anomalies(data_point: int, threshold: int) -> bool:
        return data_point > threshold

    @workflow
    def map_workflow(data: list[int] = [10, 12, 11, 10, 13, 12, 100, 11, 12, 10]) -> list[bool]:
        partial_task = functools.partial(detect_anomalies, threshold=11)
        return map_task(partial_task, concurrency=2)(data_point=data)

    python -m docs.examples.map_task_partial          # runs on local, flyte-local, kfp-local
"""

import interlock as il


@il.step
def detect_anomalies(data_point: int, threshold: int) -> bool:
    return data_point > threshold


@il.step
def count_true(flags: list[bool]) -> int:
    return sum(flags)


@il.pipeline(name="ex-map-task-partial")
def map_workflow(data: list[int] = [10, 12, 11, 10, 13, 12, 100, 11, 12, 10], threshold: int = 11):  # noqa: B006
    flags = il.map(detect_anomalies, over=data, threshold=threshold, concurrency=2)
    return flags, count_true(flags=flags)


EXPECTED = {"o0": [False, True, False, False, True, True, True, False, True, False], "o1": 5}

if __name__ == "__main__":
    for backend in ("local", "flyte-local", "kfp-local"):
        print(backend, il.run(map_workflow, backend=backend).outputs)
