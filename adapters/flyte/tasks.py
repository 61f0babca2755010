"""One flytekit task per pipeline node, whose body is the interlock runtime shim.

The task function is synthesised from the step's ports (so flytekit derives the typed
interface itself), converts what Flyte delivers into the values the step declared, calls
``execute_step`` and converts the outputs back. Failures map to Flyte's error kinds: what
the shim says the backend should retry becomes ``FlyteRecoverableException`` (Flyte retries it),
FATAL stays a plain user error (non-recoverable: Flyte does not retry it).

Under flyte-local the tasks run in this process: the backend registers a ``LocalRun`` under
the run's id, and a task finds it through the environment contract (``INTERLOCK_RUN_ID``),
so that the run's sleeper and clock reach the shim and the backend learns which nodes
flytekit reached. Worker processes (torch elastic) and pods rebuild the run from the
environment alone.
"""

from __future__ import annotations

import functools
import inspect
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flytekit.core.python_function_task import PythonFunctionTask
from flytekit.exceptions.user import FlyteRecoverableException

from interlock.core.base.errors import PipelineDefinitionError, StepFailed, StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.model.codecs import revive
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import StepSpec
from interlock.core.run.env import RunEnv
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext

from . import distributed, fanout, policies
from .types import from_flyte, outputs_to_flyte, outputs_type, python_type

BACKEND = "flyte"
# On a cluster Flyte retries recoverable errors at once and has no per-task backoff, so the
# shim keeps only CONTENTION (exponential backoff) in-process and hands the rest to Flyte.
CLUSTER_IN_PROCESS = frozenset({FailureKind.CONTENTION})

NOOP_SUFFIX = "gate-closed"


@dataclass
class LocalRun:
    """A flyte-local run as the tasks running in this process see it.

    ``run`` carries the run's sleeper and clock. ``returned`` and ``raised`` record each node
    flytekit reached: what its local execution returned (it ran, or flytekit's cache served
    it) or raised. A node in neither was never reached.
    """

    run: RunContext
    returned: dict[str, Any] = field(default_factory=dict)
    raised: dict[str, BaseException] = field(default_factory=dict)
    # Live progress: the run's (node, event, detail) callback, told as flytekit reaches nodes.
    emit: Callable[[str, str, str], None] = lambda node, event, detail: None
    started: dict[str, float] = field(default_factory=dict)  # node -> when its shim first ran
    emitted: set[str] = field(default_factory=set)  # nodes whose outcome was told live
    sizes: dict[str, int] = field(default_factory=dict)  # il.map node -> its list's length, as it ran
    _depth: dict[str, int] = field(default_factory=dict)

    def step_started(self, node: str) -> None:
        if node not in self.started:
            self.started[node] = time.monotonic()
            self.emit(node, "started", "")

    def step_ended(self, node: str, exc: BaseException | None) -> None:
        """Tell how ``node`` ended (once: an il.map's items end inside the map node)."""
        if node in self.emitted or node == NOOP_SUFFIX:  # a closed gate's no-op is no step
            return
        self.emitted.add(node)
        ran = f"{time.monotonic() - self.started[node]:.2f}s" if node in self.started else ""
        if exc is None:
            self.emit(node, Status.SUCCEEDED if node in self.started else Status.CACHED, ran)
            return
        failed = _step_failed(exc)
        frag = self.run.state.read_fragment(node) if failed is None else None
        if isinstance(failed, StepStopped):
            self.emit(node, Status.STOPPED, failed.reason)
        elif frag is not None and frag.status is Status.STOPPED:  # e.g. elastic's SignalException, its ranks stopped
            ckpt = frag.facts.get("checkpoint_at_stop")
            saved = f"checkpoint {ckpt} committed" if ckpt else "no checkpoint taken"
            self.emit(node, Status.STOPPED, f"stopped by {frag.facts.get('stopped_by') or 'a signal'} ({saved})")
        else:
            self.emit(node, Status.FAILED, f"{failed.kind}: {failed.reason}" if failed else str(exc))


# By run id: the tasks find their run through INTERLOCK_RUN_ID, never through a global that
# one run would overwrite for another.
_LOCAL_RUNS: dict[str, LocalRun] = {}


@contextmanager
def local_run(local: LocalRun) -> Iterator[LocalRun]:
    """Make ``local`` visible to the tasks flytekit runs in this process, for one run."""
    _LOCAL_RUNS[local.run.run_id] = local
    try:
        yield local
    finally:
        _LOCAL_RUNS.pop(local.run.run_id, None)


def _local_run() -> LocalRun | None:
    if not _LOCAL_RUNS:  # a pod, a worker process: no flyte-local run in this process
        return None
    run_id = RunEnv.read().run_id
    return _LOCAL_RUNS.get(run_id) if run_id else None


@dataclass(frozen=True)
class TaskOptions:
    image: str | None = None
    in_process: frozenset[FailureKind] = CLUSTER_IN_PROCESS
    spawn: bool = True  # torch elastic start method (spawn on clusters; fork for CPU tests)
    cache: bool = True  # False: compile every task uncached (flyte-local runs with cache=False)
    echo_else: bool = False  # closed-gate branch as a pod-less echo task (needs propeller's echo plugin)
    environment: dict[str, str] = field(default_factory=dict)


def task_name(spec: PipelineSpec, node: str) -> str:
    return f"{spec.name}.{node}"


def py_ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


class InterlockTaskMixin:
    """Fixes the registered name and records, in local runs, that flytekit reached the node."""

    interlock_name: str
    interlock_node: str
    interlock_pipeline_ref: str | None
    interlock_step: str

    @property
    def name(self) -> str:
        return self.interlock_name

    def local_execute(self, ctx: Any, **kwargs: Any) -> Any:
        local = _local_run()
        if local is None:
            return super().local_execute(ctx, **kwargs)  # type: ignore[misc]
        node = self.interlock_node
        local._depth[node] = local._depth.get(node, 0) + 1
        try:
            returned = super().local_execute(ctx, **kwargs)  # type: ignore[misc]
        except BaseException as exc:
            local.raised[node] = exc
            if local._depth[node] == 1:
                local.step_ended(node, exc)
            raise
        finally:
            local._depth[node] -= 1
        local.returned[node] = returned
        if not local._depth[node]:
            local.step_ended(node, None)
        return returned


def _step_failed(exc: BaseException | None) -> StepFailed | None:
    """The StepFailed under flytekit's wrapping of a task's exception, if any."""
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


_classes: dict[type, type] = {}


def _task_class(base: type) -> Any:
    if base not in _classes:
        _classes[base] = type(f"Interlock{base.__name__}", (InterlockTaskMixin, base), {})
    return _classes[base]


def blank_task(base: type, name: str, node: str, step: str, ref: str | None, pipeline: str | None = None) -> Any:
    """An interlock task of flytekit class ``base``, for the caller to initialise with
    ``base.__init__``: registered as ``name``, seen by flyte-local as node ``node`` running
    ``step``, its pipeline found by ``ref`` (else by the pipeline's name, ``pipeline``)."""
    cls = _task_class(base)
    task = cls.__new__(cls)
    task.interlock_name, task.interlock_node, task.interlock_step = name, node, step
    task.interlock_pipeline_ref = ref
    if pipeline is not None:
        task.interlock_pipeline = pipeline
    return task


_UNSET: Any = object()


def run_context(pipeline: str, local: LocalRun | None = _UNSET) -> RunContext:
    """The run's context inside a Flyte task: from the environment, else from Flyte's own ids.
    ``local``: the flyte-local run, where the caller has looked it up already."""
    if local is _UNSET:
        local = _local_run()
    if local is not None and distributed.rank() == 0 and "LOCAL_RANK" not in os.environ:
        return local.run
    seen = RunEnv.read()
    overrides: dict[str, Any] = {"pipeline": pipeline}
    if seen.run_id is None or seen.state_dir is None:
        import flytekit

        fctx = flytekit.current_context()
        overrides["backend"] = BACKEND
        if seen.run_id is None:
            # A Flyte pod always has one (FLYTE_INTERNAL_EXECUTION_ID); a bare pyflyte-execute may not.
            overrides["run_id"] = fctx.execution_id.name or "unnamed"
        if seen.state_dir is None:
            overrides["state_dir"] = Path(fctx.working_directory) / "interlock-state"
    run = RunContext.from_env(**overrides)
    # One receipt per node: ranks other than 0 keep their fragments apart.
    run.state_dir = run.state.for_rank(distributed.rank()).state_dir
    return run


def _scratch() -> Path:
    """Where output directories are staged before flytekit uploads them: its own sandbox."""
    import flytekit

    try:
        base = Path(flytekit.current_context().working_directory)
    except Exception:  # outside a flytekit execution (a direct call in a test)
        base = Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="interlock-out-", dir=base))


class _LazyScratch(os.PathLike[str]):
    """``_scratch()``, made when a codec first asks for it (``tempfile.mkdtemp(dir=...)``):
    most steps return values, not directories, and need no folder per call."""

    def __init__(self) -> None:
        self._path: str | None = None

    def __fspath__(self) -> str:
        if self._path is None:
            self._path = str(_scratch())
        return self._path


def run_node(pipeline: str, node: str, step: StepSpec, ret_type: Any, mapped: bool, kwargs: dict[str, Any]) -> Any:
    """What a node's task does when flytekit calls it: the shim, with Flyte's values converted."""
    from interlock.core.model.submaps import item_name

    from .submap import CALL_INDEX_ARG

    local = _local_run()
    run = run_context(pipeline, local)
    inputs = {p.name: from_flyte(kwargs[p.name], p.type) for p in step.inputs if p.name in kwargs}

    def write(outputs: dict[str, Any]) -> Any:
        # Inside the shim: an output that cannot be converted fails the attempt like any failure.
        return outputs_to_flyte(step.outputs, outputs, ret_type, _LazyScratch())  # type: ignore[arg-type]

    # A step of a mapped sub-pipeline's body runs for the call's item (submap.py): trial.fit[2]; a
    # mapped step there for one item of its own inside it: grid-row.square[1][0].
    level = item_name(node, (kwargs[CALL_INDEX_ARG],)) if CALL_INDEX_ARG in kwargs else node
    name = fanout.item_name(level) if mapped else level  # il.map: this instance runs one item
    if local is not None:  # flyte-local: say "started" as flytekit reaches the node
        local.step_started(node)
    try:
        with distributed.process_group(step.distributed):
            result = execute_step(run, step, name, inputs, write=write)
    except StepFailed as err:
        if err.backend_should_retry:
            raise FlyteRecoverableException(str(err)) from err
        raise
    return result.written


def step_body(pipeline: str, node: str, step: StepSpec, ret_type: Any, mapped: bool = False,
              call_item: bool = False) -> Callable[..., Any]:
    """The Python function flytekit runs for ``node``: a typed signature around the shim."""

    # Two lines on purpose: flytekit reads (tokenizes) the source of every task function when
    # it builds the task (`has_return_statement`), so a long body here cost O(lines) per node.
    def body(**kwargs: Any) -> Any:
        return run_node(pipeline, node, step, ret_type, mapped, kwargs)

    params = [
        inspect.Parameter(
            p.name, inspect.Parameter.KEYWORD_ONLY, annotation=python_type(p.type),
            **({"default": _default(p)} if p.has_default else {}),
        )
        for p in step.inputs
    ]
    if call_item:  # in a mapped sub-pipeline's body: which item of the call this run is (submap.py)
        from .submap import CALL_INDEX_ARG

        params.append(inspect.Parameter(CALL_INDEX_ARG, inspect.Parameter.KEYWORD_ONLY, annotation=int))
    body.__signature__ = inspect.Signature(params, return_annotation=ret_type)  # type: ignore[attr-defined]
    body.__annotations__ = {p.name: p.annotation for p in params} | {"return": ret_type}
    body.__name__ = body.__qualname__ = py_ident(node)
    body.__module__ = __name__
    body.__doc__ = step.doc or None
    return body


def _default(p: Any) -> Any:
    return revive(p.default, p.type)


@functools.lru_cache(maxsize=64)
def _container_env(pipeline: str, in_process: frozenset[FailureKind]) -> dict[str, str]:
    """The env contract of a task's container: the same for every node of a pipeline (copied
    into each task's env, never handed out itself)."""
    return RunEnv(pipeline=pipeline, backend=BACKEND, retry_in_process=in_process, on_cluster=True).to_env()


def build_task(spec: PipelineSpec, node: str, options: TaskOptions | None = None) -> PythonFunctionTask:
    from .resolver import resolver

    options = options or TaskOptions()
    step = spec.step_of(node)
    ret_type = outputs_type(step.outputs, f"{py_ident(node)}_outputs")
    from interlock.core.model.submaps import outermost

    body = step_body(spec.name, node, step, ret_type, mapped=spec.node(node).map is not None,
                     call_item=outermost(spec, node) is not None)
    # The container's env (flyte-local runs in this process and never applies it): on a cluster
    # SIGTERM to an interruptible step is a spot reclaim (checkpoint, PREEMPTED, Flyte retries).
    env = {**_container_env(spec.name, options.in_process), **options.environment}
    kwargs = policies.task_kwargs(
        step, in_process=options.in_process, cache=options.cache, image=options.image,
        environment=env,
    )
    base: Any = PythonFunctionTask
    task_config: Any = None
    if step.distributed is not None:
        from flytekit.core.task import TaskPlugins

        task_config = distributed.task_config(step.distributed, spawn=options.spawn)
        kwargs.setdefault("shared_memory", True)  # NCCL and DataLoader workers need more than 64Mi
        base = TaskPlugins.find_pythontask_plugin(type(task_config))
    task = blank_task(base, task_name(spec, node), node, step.name, spec.ref)
    try:
        base.__init__(task, task_config=task_config, task_function=body, task_resolver=resolver, **kwargs)
    except (TypeError, ValueError, AssertionError) as exc:
        raise PipelineDefinitionError(f"flytekit rejected the task: {exc}", pipeline=spec.name, step=node) from exc
    return task


def gate_closed() -> None:
    """The else branch of an il.when conditional: nothing to do."""


def noop_name(pipeline: str) -> str:
    # Per pipeline: two pipelines registered under one version may use different images.
    return f"{pipeline}.{NOOP_SUFFIX}"


def build_noop(pipeline: str, options: TaskOptions | None = None) -> PythonFunctionTask:
    from flytekit import Resources

    from .resolver import resolver

    options = options or TaskOptions()
    if options.echo_else:
        from flytekit.core.task import Echo

        return Echo(name=noop_name(pipeline))
    task = blank_task(PythonFunctionTask, noop_name(pipeline), NOOP_SUFFIX, NOOP_SUFFIX, None, pipeline)
    # The smallest pod Kubernetes will schedule: the branch only has to exist.
    tiny = Resources(cpu="100m", mem="64Mi")
    extra = {"container_image": options.image} if options.image else {}
    PythonFunctionTask.__init__(
        task, task_config=None, task_function=gate_closed, task_resolver=resolver, requests=tiny, limits=tiny, **extra
    )
    return task
