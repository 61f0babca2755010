"""``il.run`` and ``il.compile``: the same verbs for every backend."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import scratch
from .backends import (
    BackendOptions,
    RunOptions,
    RunResult,
    as_compiler,
    as_runner,
    check_capabilities,
    default_backend,
    default_workdir,
    get_backend,
    new_run_id,
    resolve_params,
    run_options_for,
)
from .errors import RunFailed
from .pipeline import Pipeline
from .pipeline import spec as spec_of
from .receipt import PriceTable
from .spec import PipelineSpec


def run(
    pipeline: Pipeline | PipelineSpec,
    backend: str | None = None,
    *,
    workdir: str | os.PathLike[str] | None = None,
    run_id: str | None = None,
    cache: bool = True,
    progress: Callable[[str, str, str], None] | None = None,
    raise_on_failure: bool = True,
    options: BackendOptions | Mapping[str, Any] | None = None,
    **params: Any,
) -> RunResult:
    """Run a pipeline on a backend and return its RunResult.

    ``options``: the backend's own run options, as its options class (e.g.
    ``FlyteLocalOptions(spawn=False)``) or as keywords checked against it.
    A failed run raises ``il.StepFailed`` naming the step, the failure kind, the reason, the
    hint and the receipt, or ``il.RunFailed`` when it failed outside any step (pass
    ``raise_on_failure=False`` to get the failed RunResult).
    """
    backend = backend or default_backend()
    spec = spec_of(pipeline)
    impl, caps = as_runner(spec, get_backend(backend))
    check_capabilities(spec, caps)
    backend_options = run_options_for(caps, options)
    resolved = resolve_params(spec, params)
    PriceTable.load()  # a bad INTERLOCK_PRICES fails now, not after every step ran
    run_options = RunOptions(
        run_id=run_id or new_run_id(spec.name),
        workdir=Path(workdir) if workdir else default_workdir(),
        cache=cache,
        progress=progress,
        functions=pipeline.functions if isinstance(pipeline, Pipeline) else {},
        backend_options=backend_options,
    )
    with scratch.scope() as keep:  # Model.new() dirs, checkpoint restores: gone after the run
        result = impl.run(spec, resolved, run_options)
        keep.extend(Path(v.path) for v in result.outputs.values() if hasattr(v, "path"))
    if raise_on_failure and not result.succeeded:
        err = result.error or RunFailed(f"backend {backend!r} reported a failed run", pipeline=spec.name)
        if not err.receipt_path and result.receipt_path:  # backends learn the receipt path last
            err.receipt_path = str(result.receipt_path)
        raise err
    return result


def compile(  # noqa: A001 - the public verb mirrors `kfp.compiler` / `pyflyte package`
    pipeline: Pipeline | PipelineSpec,
    backend: str,
    out: str | os.PathLike[str],
    **options: Any,
) -> list[Path]:
    """Compile a pipeline for a backend; returns the files written."""
    spec = spec_of(pipeline)
    impl, caps = as_compiler(spec, get_backend(backend))
    check_capabilities(spec, caps)
    return impl.compile(spec, Path(out), **options)
