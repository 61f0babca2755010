"""Ported from the KFP v2 sample "ParallelFor over a task's output" (kubeflow/pipelines,
samples/core/loop_output ``loop_output.py``): one task produces the list at run time, a
ParallelFor consumes it item by item (here the results are collected and summed).

Original (KFP)::

    args_generator = args_generator_op()
    with dsl.ParallelFor(args_generator.output) as item:
        print_op(s=item)

    python -m docs.examples.map_over_step_output      # runs on local, flyte-local, kfp-local
"""

import interlock as il


@il.step
def args_generator(n: int) -> list[str]:
    return [f"item-{i}" for i in range(n)]


@il.step
def shout(s: str) -> str:
    return s.upper()


@il.step
def join(parts: list[str]) -> str:
    return ",".join(parts)


@il.pipeline(name="ex-map-over-output")
def loop_output(n: int = 3):
    return join(parts=il.map(shout, over=args_generator(n=n)))


EXPECTED = {"o0": "ITEM-0,ITEM-1,ITEM-2"}

if __name__ == "__main__":
    for backend in ("local", "flyte-local", "kfp-local"):
        print(backend, il.run(loop_output, backend=backend).outputs)
