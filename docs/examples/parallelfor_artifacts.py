"""Ported from the KFP v2 sample "ParallelFor with a list of artifacts" (kubeflow/pipelines,
sdk test data ``pipeline_with_parallelfor_list_artifacts``; the "Control flow" guide's
``dsl.Collected`` of artifacts): each iteration writes a Dataset, one task reads them all.

Original (KFP)::

    with dsl.ParallelFor(["a", "b", "c"]) as content:
        t = print_and_return_as_artifact(text=content)
    print_artifacts(artifacts=dsl.Collected(t.outputs["a"]))   # Input[List[Artifact]]

    python -m docs.examples.parallelfor_artifacts     # runs on local, flyte-local, kfp-local
"""

import tempfile
from pathlib import Path

import interlock as il


@il.step
def write_text(text: str) -> il.Dataset:
    path = Path(tempfile.mkdtemp(prefix="text-"))
    (path / "data.txt").write_text(text)
    return il.Dataset(path, {"chars": len(text)})


@il.step
def concat(artifacts: list[il.Dataset]) -> str:
    return "".join((Path(a.path) / "data.txt").read_text() for a in artifacts)


@il.pipeline(name="ex-parallelfor-artifacts")
def artifacts_pipeline(texts: list[str] = ["a", "b", "c"]):  # noqa: B006 - a recorded default
    return concat(artifacts=il.map(write_text, over=texts))


EXPECTED = {"o0": "abc"}

if __name__ == "__main__":
    for backend in ("local", "flyte-local", "kfp-local"):
        print(backend, il.run(artifacts_pipeline, backend=backend).outputs)
