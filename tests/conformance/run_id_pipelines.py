"""Two small pipelines tracked in one MLflow experiment (tests/conformance/test_run_ids.py):
the same run id given to both, or to one in two work directories."""

from __future__ import annotations

import interlock as il
from interlock.plugins.mlflow import registry_at, run_for_step, track

EXPERIMENT = "run-ids"


@il.step
def double(x: int) -> int:
    return 2 * x


@il.step
def attach(x: int, store: str, ctx: il.StepContext) -> str:
    """The MLflow run this step's run is: what a step registering a model attaches it to."""
    return run_for_step(ctx, registry_at(store), EXPERIMENT)


@il.step
def shout(word: str) -> str:
    return word.upper()


@il.pipeline(name="pipeline-a")
def pipeline_a(x: int = 1, store: str = ""):
    return attach(x=double(x=x), store=store)


@il.pipeline(name="pipeline-b")
def pipeline_b(word: str = "b", store: str = ""):
    return shout(word=word)


track(pipeline_a, experiment=EXPERIMENT, store_param="store")
track(pipeline_b, experiment=EXPERIMENT, store_param="store")
