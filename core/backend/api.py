"""``il.run`` and ``il.compile``: the same verbs for every backend."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import (
    BackendOptions,
    RunOptions,
    as_compiler,
    as_runner,
    check_capabilities,
    check_run_id,
    compile_options_for,
    default_backend,
    default_workdir,
    get_backend,
    new_run_id,
    resolve_params,
    run_options_for,
)
from interlock.core.base import scratch
from interlock.core.base.errors import PipelineDefinitionError, PolicyError, RunFailed, RunIdError
from interlock.core.dsl.pipeline import Pipeline
from interlock.core.dsl.pipeline import spec as spec_of
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.triggers import Cause
from interlock.core.record.lineage_record import record_lineage_after
from interlock.core.record.outcomes import RunResult
from interlock.core.record.receipt import PriceTable
from interlock.core.record.resume import check_same_pipeline, record_params, with_recorded_params
from interlock.core.record.run_data import record_cause, record_spec
from interlock.core.record.trackers import TrackedRun, tracked
from interlock.core.report.console import RunConsole
from interlock.core.run.env import EnvName, run_dir_under, state_dir_of
from interlock.core.run.exporters import exporting
from interlock.core.run.state import RunState, lock_run


def run(
    pipeline: Pipeline | PipelineSpec,
    backend: str | None = None,
    *,
    workdir: str | os.PathLike[str] | None = None,
    run_id: str | None = None,
    cache: bool = True,
    progress: Callable[[str, str, str], None] | bool | None = None,
    raise_on_failure: bool = True,
    options: BackendOptions | Mapping[str, Any] | None = None,
    resume: str | None = None,
    checkpoint_store: str | None = None,
    pushgateway: str | None = None,
    triggered_by: Cause | None = None,
    **params: Any,
) -> RunResult:
    """Run a pipeline on a backend and return its RunResult.

    ``options``: the backend's own run options, as its options class (e.g.
    ``FlyteLocalOptions(spawn=False)``) or as keywords checked against it.
    A failed run raises ``il.StepFailed`` naming the step, the failure kind, the reason, the
    hint and the receipt, or ``il.RunFailed`` when it failed outside any step (pass
    ``raise_on_failure=False`` to get the failed RunResult).

    ``progress``: what a person sees while it runs. Default (None or True): a ``RunConsole``
    on stderr that shows each step's events, its own prints and log records as they happen
    (prefixed with the step), a heartbeat for long steps and a closing summary; pass your own
    ``il.RunConsole(verbose=True, heartbeat_s=...)`` to tune it, a callable ``(node, event,
    detail)`` to get the events alone, or False for silence.

    ``resume``: the id of an earlier run in ``workdir`` to run again (``--resume`` in the
    CLI). Its stop markers are cleared; its checkpoints, cached outputs and the outputs of
    the steps that succeeded are kept (see docs/resuming.md).

    ``pushgateway``: ``host:port`` of a Prometheus Pushgateway that gets each step's and the
    run's metrics (default: ``$INTERLOCK_PUSHGATEWAY``; off when neither is set; docs/metrics.md).

    ``triggered_by``: why the run started (an ``il.Cause``; ``interlock watch`` passes its
    trigger's): the receipt's ``triggered_by``, a console line, the run report and the
    tracker's tags carry it, on every backend (docs/triggers.md).

    ``checkpoint_store``: where every step without its own ``CheckpointPolicy(store=...)``
    keeps checkpoints: a directory or a store URI such as ``s3://bucket/prefix`` (default:
    ``$INTERLOCK_CHECKPOINT_ROOT``, else the run's own folder). A resume reuses the run's. Reusing ``run_id`` means the
    same. A run id is checked up front (``RUN_ID_RULE``) and a run folder is locked while
    its run runs: a second run with the same id fails at once with ``il.RunInProgress``.
    """
    from interlock.core.dsl.loader import loading

    target = loading()
    if target is not None:
        # `interlock run file.py` imports the file; an unguarded il.run at its top level would
        # start the pipeline a second time, with the script's arguments instead of the CLI's.
        raise PipelineDefinitionError(
            f"{target} calls il.run({spec_of(pipeline).name}) at its top level, so importing it runs the pipeline; "
            "interlock did not run it",
            hint='guard the call with `if __name__ == "__main__":` (then `python FILE` and `interlock run FILE` '
            "each run it once)",
        )
    if resume is not None:
        check_run_id(resume)
        if run_id is not None and run_id != resume:
            raise RunIdError(f"run_id={run_id!r} and resume={resume!r} name different runs; pass one of them")
        run_id = resume
    if run_id is not None:
        check_run_id(run_id)
    backend = backend or default_backend()
    spec = spec_of(pipeline)
    impl, caps = as_runner(spec, get_backend(backend))
    check_capabilities(spec, caps)
    backend_options = run_options_for(caps, options)
    workdir = Path(workdir) if workdir else default_workdir()
    run_id = run_id or new_run_id(spec.name)
    state = RunState(state_dir_of(run_dir_under(workdir, run_id)), run_id)
    if resume is not None and not state.state_dir.is_dir():
        raise RunIdError(
            f"no run {resume} in {workdir} to resume",
            hint=f"runs there: {', '.join(_runs_in(workdir)) or 'none'}; check --workdir",
        )
    if state.state_dir.is_dir():
        check_same_pipeline(spec, state, workdir)
    # A resumed run is the same run: parameters not given again keep the values it ran with.
    resolved = resolve_params(spec, with_recorded_params(spec, state, params) if state.state_dir.is_dir() else params)
    PriceTable.load()  # a bad INTERLOCK_PRICES fails now, not after every step ran
    console = RunConsole() if progress is None or progress is True else progress if isinstance(progress, RunConsole) else None
    callback = console or (progress if callable(progress) else None)
    run_options = RunOptions(
        run_id=run_id,
        workdir=workdir,
        cache=cache,
        progress=callback,
        functions=pipeline.functions if isinstance(pipeline, Pipeline) else {},
        backend_options=backend_options,
        checkpoint_store=checkpoint_store_for(state, checkpoint_store),
        triggered_by=triggered_by,
    )
    resuming = state.state_dir.is_dir()
    tracked_run = TrackedRun(spec, run_id, backend, workdir, state.state_dir, resolved, time.time(), resuming)
    t0 = time.monotonic()
    with exporting(pushgateway), lock_run(run_options.run_dir, run_options.run_id), scratch.scope() as keep, \
            tracked(tracked_run) as tracking, (console.watching(state.state_dir) if console else nullcontext()):
        # scratch: Model.new() dirs, checkpoint restores are gone after the run (outputs kept)
        if resuming:  # a reused id is a resume: same run, same checkpoint keys
            resumed = state.resume()
            cleared = ", ".join(f"{c['node']} ({c['kind']})" for c in resumed["cleared"])
            run_options.emit("", "resuming", f"run {run_options.run_id}" + (f"; cleared stop markers: {cleared}" if cleared else ""))
        if triggered_by is not None:
            record_cause(state, triggered_by, resolved)
            run_options.emit("", "triggered", triggered_by.summary())
        record_params(spec, state, resolved)
        record_checkpoint_store(state, run_options.checkpoint_store)
        record_spec(state.state_dir, spec, resolved)  # the run report draws the graph the run ran
        result = impl.run(spec, resolved, run_options)
        record_lineage_after(spec, result, workdir, state.state_dir, since=tracked_run.started)
        tracking.finished(result)  # trackers (MLflow) see the run once its lineage is recorded
        if result.receipt_path and Path(result.receipt_path).is_file():  # a local backend: the report goes next to it
            from interlock.core.report.report_html import write_report_quietly

            write_report_quietly(Path(result.receipt_path).parent, spec)
        keep.extend(Path(v.path) for v in result.outputs.values() if hasattr(v, "path"))
    if console is not None and console is not progress:  # il.run's own console closes with the summary
        console.summary(result, time.monotonic() - t0)
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
    *,
    options: BackendOptions | None = None,
    **keywords: Any,
) -> list[Path]:
    """Compile a pipeline for a backend; returns the files written.

    The backend's compile options (its ``Capabilities.compile_options``, listed by
    ``interlock backends``) as keywords, e.g. ``project="fraud", image="ghcr.io/acme/train:v7"``
    for ``flyte``, checked and read as each option's type before anything is written; or as
    its options object (``options=KfpOptions(...)``).
    """
    spec = spec_of(pipeline)
    impl, caps = as_compiler(spec, get_backend(backend))
    if options is not None and keywords:
        raise PolicyError("pass compile options as options=... or as keywords, not both")
    typed = compile_options_for(caps, options if options is not None else keywords)
    check_capabilities(spec, caps)
    files = impl.compile(spec, Path(out), typed)
    literals = secret_literals(spec)
    if literals:  # a compiled pipeline holds its defaults and constants as written: say so
        logging.getLogger("interlock.compile").warning(
            "interlock: warning: the compiled pipeline holds secret-looking values as written: %s; pass them "
            "at run time (-p NAME=..., a parameter without a default) or read them from an il.Secret",
            ", ".join(literals),
        )
    return files


def secret_literals(spec: PipelineSpec) -> list[str]:
    """Where ``spec`` holds a secret as a literal, which compiling writes out as it is: a
    parameter default or a constant input under a credential name, or holding a URL password."""
    from interlock.core.run.redact import DEFAULT as redactor

    def secret(name: str, value: Any) -> bool:
        return value not in (None, "") and redactor({name: value}) != {name: value}

    found = [f"the default of parameter {p.name!r}" for p in spec.params if p.has_default and secret(p.name, p.default)]
    for node in (*spec.nodes, *spec.finally_nodes()):
        found.extend(f"the constant input {port!r} of step {node.name!r}" for port, b in node.inputs
                     if b.kind == "const" and secret(port, b.value))
    return found


CHECKPOINT_STORE_FILE = "checkpoint_store"  # in the state dir: a resume finds the same store


def checkpoint_store_for(state: RunState, given: str | None) -> str | None:
    """The run's checkpoint store: as given, else the one a resumed run used, else the env's."""
    if given:
        if "://" not in given:
            given = str(Path(given).resolve())  # steps may run elsewhere (kfp-local's task dirs)
        return given
    recorded = state.state_dir / CHECKPOINT_STORE_FILE
    if recorded.is_file():
        return recorded.read_text(encoding="utf-8").strip() or None
    return os.environ.get(EnvName.CHECKPOINT_ROOT) or None


def record_checkpoint_store(state: RunState, store: str | None) -> None:
    if store:
        state.state_dir.mkdir(parents=True, exist_ok=True)
        (state.state_dir / CHECKPOINT_STORE_FILE).write_text(store, encoding="utf-8")


def _runs_in(workdir: Path, limit: int = 10) -> list[str]:
    runs = workdir / "runs"
    found = sorted((p for p in runs.iterdir() if (p / "state").is_dir()), key=lambda p: p.stat().st_mtime) if runs.is_dir() else []
    return [p.name for p in found[-limit:]]
