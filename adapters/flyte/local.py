"""``flyte-local``: run a pipeline through flytekit's own local execution.

flytekit executes the compiled workflow in-process (conditionals, typed literals, its local
cache); the shim inside each task adds what flytekit local does not do: retries, timeouts,
checkpoint restore and receipts. flytekit's cache and blob store are pointed at interlock's
work directory for the run, never at ``~/.flyte``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from interlock.core.backends import RunOptions, RunResult, StepOutcome
from interlock.core.errors import StepFailed
from interlock.core.receipt import assemble_receipt
from interlock.core.runtime import ALL_KINDS, RunContext, fragment_path
from interlock.core.spec import PipelineSpec

from . import tasks as _tasks
from .types import from_flyte, to_flyte
from .workflow import build_entities

BACKEND = "flyte-local"


@contextmanager
def isolated_flyte(cache_dir: Path, data_dir: Path, tmp_dir: Path) -> Iterator[None]:
    """flytekit's local cache and blob store in directories interlock controls, for one run."""
    import flytekit.core.local_cache as lc
    from diskcache import Cache
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.data_persistence import FileAccessProvider

    cache_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    saved = (lc.CACHE_LOCATION, lc.LocalTaskCache._initialized, getattr(lc.LocalTaskCache, "_cache", None))
    lc.CACHE_LOCATION = str(cache_dir)
    store = Cache(str(cache_dir))
    lc.LocalTaskCache._cache = store
    lc.LocalTaskCache._initialized = True
    # Cached outputs point at blobs: keep them next to the cache so a hit still finds its data.
    files = FileAccessProvider(local_sandbox_dir=str(data_dir / "sandbox"), raw_output_prefix=str(data_dir / "raw"))
    ctx = FlyteContextManager.current_context()
    # flytekit's local execution makes its user-space directories with tempfile: keep those
    # (and the steps' scratch artifacts) in the work directory too, not in the system /tmp.
    saved_tmp = tempfile.tempdir
    tempfile.tempdir = str(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    try:
        with FlyteContextManager.with_context(ctx.with_file_access(files)):
            yield
    finally:
        tempfile.tempdir = saved_tmp
        store.close()
        lc.CACHE_LOCATION, lc.LocalTaskCache._initialized, prior = saved
        if prior is not None:
            lc.LocalTaskCache._cache = prior
        elif hasattr(lc.LocalTaskCache, "_cache"):
            del lc.LocalTaskCache._cache


@contextmanager
def run_state(run: RunContext, journal: list[str]) -> Iterator[None]:
    """Expose the run to the task bodies: in-process (globals) and to worker processes (env)."""
    saved_env = {k: os.environ.get(k) for k in run.to_env()}
    os.environ.update(run.to_env())
    _tasks.LOCAL_RUN, _tasks.LOCAL_JOURNAL = run, journal
    try:
        yield
    finally:
        _tasks.LOCAL_RUN, _tasks.LOCAL_JOURNAL = None, None
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _find_step_failed(exc: BaseException | None) -> StepFailed | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, StepFailed):
            return exc
        inner = getattr(exc, "value", None)  # flytekit's FlyteUserRuntimeException wraps .value
        if isinstance(inner, BaseException) and id(inner) not in seen:
            exc = inner
            continue
        exc = exc.__cause__ or exc.__context__
    return None


def _fragment(run: RunContext, node: str) -> dict[str, Any] | None:
    path = fragment_path(run, node)
    return json.loads(path.read_text()) if path.exists() else None


def outcomes(spec: PipelineSpec, run: RunContext, journal: list[str], failed: bool) -> dict[str, StepOutcome]:
    """What happened to each node: ran (a fragment), cached (reached, no fragment), or not reached."""
    out: dict[str, StepOutcome] = {}
    for node in spec.nodes:
        frag = _fragment(run, node.name)
        if frag is not None:
            attempts = frag.get("attempts", [])
            last = attempts[-1] if attempts else {}
            out[node.name] = StepOutcome(
                frag["status"], attempts=len(attempts), failure=last.get("failure") if frag["status"] == "failed" else None,
                duration_s=round(frag.get("ended", 0) - frag.get("started", 0), 6),
            )
        elif node.name in journal:
            out[node.name] = StepOutcome("cached", cached=True)
        else:
            out[node.name] = StepOutcome("not-run" if failed else "skipped")
    return out


class FlyteLocalRunner:
    def __init__(self, spec: PipelineSpec, options: RunOptions, *, spawn: bool = True):
        self.spec = spec
        self.options = options
        self.spawn = spawn

    def run(self, params: dict[str, Any]) -> RunResult:
        spec, options = self.spec, self.options
        started = time.time()
        state_dir = options.run_dir / "state"
        run = RunContext(spec.name, options.run_id, BACKEND, state_dir, retry_in_process=ALL_KINDS,
                         sleeper=options.sleeper)
        entities = build_entities(spec, _tasks.TaskOptions(in_process=ALL_KINDS, spawn=self.spawn, cache=options.cache))
        inputs = {p.name: to_flyte(params[p.name], p.type, options.run_dir) for p in spec.params if p.name in params}
        journal: list[str] = []
        error: BaseException | None = None
        returned: Any = None
        dirs = (options.cache_dir / "flyte", options.cache_dir / "flyte-data", options.run_dir / "tmp")
        with isolated_flyte(*dirs), run_state(run, journal):
            try:
                returned = entities.workflow(**inputs)
            except Exception as exc:  # flytekit wraps the step's StepFailed; unwrapped below
                error = exc
        steps = outcomes(spec, run, journal, failed=error is not None)
        for name, o in steps.items():
            options.emit(name, o.status, f"{o.attempts} attempt(s)" if o.attempts else "")
        status = "failed" if error else "succeeded"
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=BACKEND, state_dir=state_dir, params=params, status=status,
            statuses={k: v.status for k, v in steps.items()}, started=started,
            cached={k: v.cached for k, v in steps.items()},
        )
        step_error: StepFailed | None = None
        if error is not None:
            step_error = _find_step_failed(error) or self._failure_from_fragments(steps, error)
            step_error.receipt_path = str(receipt)
        outputs = {} if error else self._outputs(returned)
        return RunResult(spec.name, options.run_id, BACKEND, status, outputs, steps, receipt, step_error)

    def _failure_from_fragments(self, steps: dict[str, StepOutcome], error: BaseException) -> StepFailed:
        for name, o in steps.items():
            if o.status == "failed" and o.failure:
                return StepFailed(name, o.failure.get("kind", "FATAL"), o.failure.get("reason", str(error)),
                                  hint=o.failure.get("hint"), attempts=o.attempts, pipeline=self.spec.name)
        return StepFailed("?", "FATAL", f"flytekit failed the run: {error}", pipeline=self.spec.name)

    def _outputs(self, returned: Any) -> dict[str, Any]:
        names = [k for k, _ in self.spec.output_types]
        types = dict(self.spec.output_types)
        if not names:
            return {}
        if len(names) == 1 and names[0] == "o0":
            values = {"o0": returned}
        else:
            values = {n: getattr(returned, n) for n in names}
        return {n: from_flyte(v, types[n]) for n, v in values.items()}
