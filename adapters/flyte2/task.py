"""What a step's Flyte 2 task does: the runtime shim, with values as references (``values.py``).

Failures map to the SDK's: a failure the shim leaves to the backend (``backend_should_retry``)
is a plain exception, which Flyte retries under the task's ``RetryStrategy`` (with its
``Backoff``); every other failure is ``flyte.errors.NonRecoverableError``: Flyte does not
retry it, even with attempts left.

Under flyte2-local the tasks run in this process: the runner registers a ``LocalRun`` under
the run id (``INTERLOCK_RUN_ID`` in the environment), through which a task finds the run (its
sleeper and clock), its in-process step functions, and tells which nodes its shim ran.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.base.errors import StepFailed, StepSkipped, StepStopped
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.run.env import EnvName, RunEnv, state_dir_under
from interlock.core.run.output_failure import output_failed
from interlock.core.run.runtime import execute_step
from interlock.core.run.state import RunContext

from . import values

BACKEND = "flyte2"


@dataclass
class LocalRun:
    """A flyte2-local run as the tasks in this process see it."""

    run: RunContext
    store: Path  # the run's value store (the compiled module's STORE is unused here)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    emit: Callable[[str, str, str], None] = lambda node, event, detail: None
    started: set[str] = field(default_factory=set)  # nodes (and map items) whose shim ran
    raised: dict[str, StepFailed] = field(default_factory=dict)  # what the shim raised, by node
    done: dict[str, str] = field(default_factory=dict)  # how each node that succeeded ran, for its line
    driver: Any = None  # the run's Driver, once its task started
    stopped: bool = False  # a step was stopped (SIGTERM, Ctrl-C): no other starts
    on_thread: Callable[[Callable[[], Any]], Future[Any]] | None = None  # runs a map's item on one of its threads


class NotStarted(Exception):
    """A step the run did not start because it was told to stop."""


_LOCAL_RUNS: dict[str, LocalRun] = {}


@contextmanager
def local_run(local: LocalRun) -> Iterator[LocalRun]:
    _LOCAL_RUNS[local.run.run_id] = local
    try:
        yield local
    finally:
        _LOCAL_RUNS.pop(local.run.run_id, None)


def current_local() -> LocalRun | None:
    if not _LOCAL_RUNS:  # a pod: no flyte2-local run in this process
        return None
    run_id = os.environ.get(EnvName.RUN_ID)  # the one variable it needs (RunEnv.read parses them all)
    return _LOCAL_RUNS.get(run_id) if run_id else None


def value_store(store: str) -> Path:
    """The value store of the task's run: flyte2-local's, else the module's ``store``."""
    local = current_local()
    return local.store if local is not None else Path(store)


def run_context(spec: PipelineSpec, store: str) -> RunContext:
    """The run a task belongs to: flyte2-local's in this process, else from the environment
    and the Flyte run's name, its state under the value store (which every task can read)."""
    local = current_local()
    if local is not None:
        return local.run
    seen = RunEnv.read()
    overrides: dict[str, Any] = {"pipeline": spec.name, "backend": seen.backend or BACKEND}
    if seen.run_id is None:
        import flyte

        overrides["run_id"] = flyte.ctx().action.run_name or "unnamed"
    if seen.run_state_dir() is None:
        overrides["state_dir"] = state_dir_under(Path(store), overrides.get("run_id") or seen.run_id or "unnamed")
    return RunContext.from_env(**overrides)


def flyte_error(err: StepFailed) -> Exception:
    """A failure the shim leaves to the backend is a plain exception, which Flyte retries
    under the task's RetryStrategy (with its Backoff); every other is NonRecoverableError."""
    import flyte.errors

    if err.backend_should_retry:
        return RuntimeError(str(err))
    return flyte.errors.NonRecoverableError(str(err))


def outputs_json(run: RunContext, step: Any, name: str, root: Path, outputs: dict[str, Any]) -> str:
    """The outputs' references as JSON, written after the attempt, as the local backend does:
    a value that cannot cross (an unserializable value, a full disk) fails the step, unretried."""
    try:
        return json.dumps({p.name: values.put(root, outputs[p.name], p.type) for p in step.outputs})
    except Exception as exc:  # noqa: BLE001 - recorded as the step's failure
        raise output_failed(run, step, name, exc) from exc


async def run_step(spec: PipelineSpec, store: str, node: str, name: str, refs: dict[str, str]) -> str:
    """Node ``node`` (run as ``name``: a map's item is ``node[i]``) through the shim; the
    outputs' references as JSON."""
    import flyte.errors

    step = spec.step_of(node)
    local = current_local()
    run = run_context(spec, store)
    root = local.store if local is not None else Path(store)
    types = {p.name: p.type for p in step.inputs}

    def inputs() -> dict[str, Any]:  # read after the shim's stop-marker check
        return {k: values.get(root, ref, types[k]) for k, ref in refs.items() if ref and k in types}

    fn = local.functions.get(step.name) if local is not None else None

    def call() -> Any:
        if local is not None and local.stopped:
            raise NotStarted(name)  # the run was told to stop: nothing new starts (a map's other items)
        if local is not None:
            local.started.add(name)
            if name == node:  # a map's items are told as the map
                local.emit(name, "started", "")
        try:
            return execute_step(run, step, name, inputs, fn)
        except StepStopped:
            if local is not None:  # here, on the run's thread: before the next queued item starts
                local.stopped = True
            raise

    try:
        if local is not None and local.on_thread is not None and name != node and step.timeout_s is None:
            result = await asyncio.wrap_future(local.on_thread(call))  # flyte2-local: a map's items side by side
        elif local is not None:  # flyte2-local: here, on the run's thread (its signals and alarms)
            result = call()
        else:  # a pod: on a thread, so that a map's items run side by side
            result = await asyncio.to_thread(call)
        written = outputs_json(run, step, name, root, result.outputs)
    except NotStarted as err:
        raise flyte.errors.NonRecoverableError(str(err)) from err
    except StepSkipped as skip:
        # il.Skip: the task ends without outputs, as a failure Flyte does not retry, so that the
        # SDK's cache never serves the skip (as no backend caches one); the driver reads from the
        # node's fragment that it skipped itself.
        if local is not None:
            local.done[name] = skip.why
        raise flyte.errors.NonRecoverableError(str(skip)) from None
    except StepFailed as err:
        if local is not None:
            local.raised[name] = err
            local.stopped = local.stopped or isinstance(err, StepStopped)
        raise flyte_error(err) from err
    if local is not None:
        local.done[name] = f"{result.ended - result.started:.2f}s, {len(result.attempts)} attempt(s)"
    return written
