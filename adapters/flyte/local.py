"""``flyte-local``: run a pipeline through flytekit's own local execution.

flytekit executes the compiled workflow in-process (conditionals, typed literals, its local
cache); the shim inside each task adds what flytekit local does not do: retries, timeouts,
checkpoint restore and receipts. flytekit's cache and blob store are pointed at interlock's
work directory for the run, never at ``~/.flyte``.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.status import Status
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult, Seen, settle, with_finally
from interlock.core.record.receipt import assemble_receipt, prefetch_git_info
from interlock.core.run import live
from interlock.core.run.env import exported, state_dir_of
from interlock.core.run.records import ALL_KINDS
from interlock.core.run.state import RunContext

from . import fanout
from .tasks import LocalRun, TaskOptions, _step_failed, local_run
from .types import from_flyte, to_flyte
from .workflow import Entities, build_entities, continuing, gate_values

BACKEND = "flyte-local"

# The flytekit entities of the last few specs run in this process, built once as a flytekit
# user's module-level @workflow is: a rerun of the same pipeline skips building a task per
# step and flytekit's compile of the workflow. Keyed by the spec object (held here, so its
# id is not reused) and the task options; specs are frozen, and a step's function is
# imported by reference when its task runs, so nothing a run depends on is stale.
_BUILT: OrderedDict[tuple[int, frozenset[Any], bool, bool], tuple[PipelineSpec, Entities]] = OrderedDict()
_BUILT_MAX = 8
_BUILT_LOCK = threading.Lock()


def entities_for(spec: PipelineSpec, options: TaskOptions) -> Entities:
    """``build_entities(spec, options)``, reused while the same spec object runs again."""
    key = (id(spec), options.in_process, options.spawn, options.cache)
    with _BUILT_LOCK:
        held = _BUILT.get(key)
        if held is not None and held[0] is spec:
            _BUILT.move_to_end(key)
            return held[1]
    entities = build_entities(spec, options)
    with _BUILT_LOCK:
        _BUILT[key] = (spec, entities)
        while len(_BUILT) > _BUILT_MAX:
            _BUILT.popitem(last=False)
    return entities


# flytekit opens its local cache once per process; so does interlock, per cache directory
# (a run's open and close of the SQLite store cost more than a cached rerun's steps). A
# store whose database file was replaced or removed since (a new work directory at the same
# path) is reopened: the open store keeps its file's inode allocated, so a new file at the
# path never has the same inode number.
_STORES: OrderedDict[str, tuple[int, Any]] = OrderedDict()
_STORES_MAX = 4
_STORES_LOCK = threading.Lock()


def _db_inode(cache_dir: Path) -> int | None:
    try:
        return (cache_dir / "cache.db").stat().st_ino  # diskcache's database file
    except OSError:
        return None


def _store(cache_dir: Path) -> Any:
    from diskcache import Cache

    key = str(cache_dir)
    with _STORES_LOCK:
        held = _STORES.get(key)
        if held is not None and held[0] == _db_inode(cache_dir):
            _STORES.move_to_end(key)
            return held[1]
        if held is not None:
            held[1].close()
        store = Cache(key)
        _STORES[key] = (_db_inode(cache_dir) or -1, store)
        while len(_STORES) > _STORES_MAX:
            _STORES.popitem(last=False)[1][1].close()
        return store


@contextmanager
def isolated_flyte(cache_dir: Path, data_dir: Path, tmp_dir: Path) -> Iterator[None]:
    """flytekit's local cache and blob store in directories interlock controls, for one run."""
    import flytekit.core.local_cache as lc
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.core.data_persistence import FileAccessProvider

    cache_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    saved = (lc.CACHE_LOCATION, lc.LocalTaskCache._initialized, getattr(lc.LocalTaskCache, "_cache", None))
    lc.CACHE_LOCATION = str(cache_dir)
    lc.LocalTaskCache._cache = _store(cache_dir)
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
        lc.CACHE_LOCATION, lc.LocalTaskCache._initialized, prior = saved
        if prior is not None:
            lc.LocalTaskCache._cache = prior
        elif hasattr(lc.LocalTaskCache, "_cache"):
            del lc.LocalTaskCache._cache


@contextmanager
def run_state(run: RunContext, emit: Any = None) -> Iterator[LocalRun]:
    """Expose the run to the task bodies: by run id in this process, through the env to workers."""
    local = LocalRun(run, emit=emit) if emit is not None else LocalRun(run)
    with exported(run.to_env()), local_run(local) as local:
        yield local


def observed(spec: PipelineSpec, local: LocalRun, since: float = 0.0) -> dict[str, Seen]:
    """What flytekit did with each node it reached: ran it (a fragment written since the run
    started: a resumed run has fragments of its earlier attempts), served it from its cache
    (no new fragment: the shim did not run), or failed it."""
    state = local.run.state

    # A node whose shim ran in this process ran in this run; the others' fragments are read
    # (a resumed run has fragments of its earlier attempts), in one listing of the folder.
    others = state.fragments(n for n in local.returned if n not in local.started)

    def ran(name: str) -> bool:
        if name in local.started:
            return True
        frag = others.get(name)
        return frag is not None and frag.ended >= since

    seen: dict[str, Seen] = {}
    for node in (*spec.nodes, *spec.finally_nodes()):  # il.finally_'s steps too
        name = node.name
        if name in local.raised:
            exc = local.raised[name]
            seen[name] = Seen(Status.FAILED, error=_step_failed(exc), detail=f"flytekit failed the task: {exc}")
        elif name in local.returned:
            seen[name] = Seen(Status.SUCCEEDED if ran(name) else Status.CACHED)
    return seen


class FlyteLocalRunner:
    def __init__(self, spec: PipelineSpec, options: RunOptions, *, spawn: bool = True):
        self.spec = spec
        self.options = options
        self.spawn = spawn

    def run(self, params: dict[str, Any]) -> RunResult:
        spec, options = self.spec, self.options
        started = time.time()
        prefetch_git_info(spec)  # the receipt takes the code as the run starts (git, if needed, in a thread)
        state_dir = state_dir_of(options.run_dir)
        run = RunContext(spec.name, options.run_id, BACKEND, state_dir, retry_in_process=ALL_KINDS,
                         sleeper=options.sleeper, checkpoint_root=options.checkpoint_store)
        entities = entities_for(spec, TaskOptions(in_process=ALL_KINDS, spawn=self.spawn, cache=options.cache))
        inputs = {p.name: to_flyte(params[p.name], p.type, options.run_dir) for p in spec.params if p.name in params}
        error: BaseException | None = None
        returned: Any = None
        dirs = (options.cache_dir / "flyte", options.cache_dir / "flyte-data", options.run_dir / "tmp")
        # live.held(): the steps' output capture is installed once for the run, not per step.
        with isolated_flyte(*dirs), run_state(run, options.emit) as local, live.held():
            try:
                with continuing(spec, entities.plan, local.returned):
                    returned = entities.workflow(**inputs)
            except Exception as exc:  # flytekit wraps the step's StepFailed; the observer has it
                error = exc
        seen = observed(spec, local, since=started)
        maps = fanout.observe(spec, run.state, seen, local.returned, local.sizes)  # il.map: items -> the mapped node
        if spec.subs:  # il.map over a sub-pipeline: each call's items -> its body nodes (submap.py)
            from .submap import call_reports

            maps.update(call_reports(spec, run.state, local.sizes, seen))
        fanout.reset_counters(run.run_id)
        gates = gate_values(spec, local.returned, _typed(spec, params))
        outcome = settle(
            spec, run.state, seen, gates=gates,
            failed=f"flytekit failed the run: {error}" if error is not None and not _finally_failed(spec, local) else None,
        )
        outcome = with_finally(spec, run.state, outcome, seen, gates)  # il.finally_, if any
        for name, o in outcome.steps.items():  # what was not told live (skipped, not run)
            if name not in local.emitted:
                options.emit(name, o.status, f"{o.attempts} attempt(s)" if o.attempts else "")
        outputs = {} if outcome.error else self._outputs(returned)
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=BACKEND, state_dir=state_dir, params=params, status=outcome.status,
            statuses=outcome.statuses, started=started, fragments=outcome.fragments, outputs=outputs, gates=gates,
        )
        if outcome.error is not None:
            outcome.error.receipt_path = str(receipt)
        return RunResult(spec.name, options.run_id, BACKEND, outcome.status, outputs, outcome.steps, receipt,
                         outcome.error, maps=maps)

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


def _finally_failed(spec: PipelineSpec, local: LocalRun) -> bool:
    """The run failed only because an il.finally_ step did (the body's nodes all passed)."""
    names = {n.name for n in spec.finally_nodes()}
    return bool(set(local.raised) & names) and not (set(local.raised) - names)


def _typed(spec: PipelineSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as the spec types them (with defaults), for deciding conditions on them."""
    from interlock.core.model.codecs import revive

    values = {p.name: revive(p.default, p.type) for p in spec.params if p.has_default}
    values.update({p.name: revive(params[p.name], p.type) for p in spec.params if p.name in params})
    return values
