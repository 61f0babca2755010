"""Port of the KFP v2 sample "pipeline in pipeline (complex)"
(sdk/python/test_data/pipelines/pipeline_in_pipeline_complex.py, kubeflow/pipelines): an inner
pipeline prints a message and, depending on it, "world" or "Bye!"; the outer pipeline prints
its own message and calls the inner pipeline for "Hello" and for "world!".

The sample loops over the two messages with ``dsl.ParallelFor``; they are constants written in
the pipeline, so here the inner pipeline is simply called twice (``il.map`` maps steps, not
pipelines). Each call compiles to a nested DAG on KFP and a sub-workflow on Flyte.

    python docs/examples/pipeline_in_pipeline.py      # runs on local, flyte-local and kfp-local
"""

from __future__ import annotations

import interlock as il

# il.otherwise once it is exported from interlock
from interlock.core.dsl.branches import otherwise


@il.step
def print_op(msg: str) -> str:
    print(msg)
    return msg


@il.pipeline(name="inner-pipeline")
def graph_component(msg: str) -> str:
    said = print_op(msg=msg)
    with il.when(said == "Hello"):
        print_op.named("world")(msg="world")
    with otherwise():
        print_op.named("bye")(msg="Bye!")
    return said


@il.pipeline(name="pipeline-in-pipeline-complex")
def my_pipeline(msg: str = "Hello"):
    print_op(msg=msg)
    first = graph_component.named("hello")(msg="Hello")
    second = graph_component.named("world")(msg="world!")
    return first, second


if __name__ == "__main__":
    # Import this file as a module: kfp-local's components import the pipeline by module name.
    import pipeline_in_pipeline as example
    from _compare import same_everywhere

    print(same_everywhere(example.my_pipeline))
