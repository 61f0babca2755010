"""``flyte2-local``: the compiled module, imported, its driver run in the `flyte` SDK's local mode.

What runs is what ``interlock compile --backend flyte2`` writes (``render.py``), with the
run's work directory as its value store and the shim's in-process retries. The SDK's local
run (its ``Runner.run`` coroutine) runs on an event loop of the thread that started the run,
and so does each step's shim, inline, one at a time in plan order, as on the local backend:
there its SIGTERM/SIGINT handling (checkpoint, then stop) and its SIGALRM timeout work as on
the local backend, and no step pays a hand-off between threads. A map's items run on threads
(``ItemThreads``), as on the local backend. The SDK keeps its local cache and run records in
a SQLite file under ``~/.flyte/`` by default: here it is the work directory's
(``<workdir>/cache/flyte2/local-cache``), so runs never touch the user's home.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import inspect
import json
import logging
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.errors import CapabilityError, RunFailed
from interlock.core.model.codecs import revive, to_jsonable
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult, settle, with_finally
from interlock.core.record.receipt import assemble_receipt, prefetch_git_info
from interlock.core.run import live
from interlock.core.run.bindings import gate_decisions, pipeline_output
from interlock.core.run.env import exported, state_dir_of
from interlock.core.run.records import ALL_KINDS
from interlock.core.run.runtime import StopRequested
from interlock.core.run.state import RunContext

from .render import PRIMITIVES, render
from .task import LocalRun, NotStarted, local_run

BACKEND = "flyte2-local"

# The modules of the last few specs run in this process, as a Flyte 2 user's module is
# imported once: a later run of the same spec, in any work directory, skips rendering and
# importing it (the module names no directory: each run's tasks take its value store from
# the run, ``LocalRun.store``). Keyed by the spec object (held here, so its id is not reused).
_MODULES: OrderedDict[int, tuple[PipelineSpec, ModuleType]] = OrderedDict()
_MODULES_MAX = 8
_LOCK = threading.Lock()
LOCAL_STORE = ""  # the module's STORE under flyte2-local: unused, each run has its own


def module_for(spec: PipelineSpec) -> ModuleType:
    with _LOCK:
        held = _MODULES.get(id(spec))
        if held is not None and held[0] is spec:
            _MODULES.move_to_end(id(spec))
            return held[1]
    # One step after another in plan order, so that a failure stops the same steps as on local.
    source = render(spec, store=LOCAL_STORE, in_process=ALL_KINDS, backend=BACKEND, concurrent=False,
                    triggers=False)  # interlock watch starts the runs here
    name = f"interlock_flyte2_{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is None:  # executed from memory: nothing is left in the work directory
        module = ModuleType(name)
        sys.modules[name] = module
        exec(compile(source, f"<flyte2 module of {spec.name}>", "exec"), module.__dict__)  # noqa: S102 - ours
    with _LOCK:
        _MODULES[id(spec)] = (spec, module)
        while len(_MODULES) > _MODULES_MAX:
            _MODULES.popitem(last=False)
    return module


_INIT = threading.Lock()
_state: dict[str, Any] = {"init": False, "db": None}


@contextmanager
def isolated_flyte(cache_dir: Path) -> Iterator[None]:
    """The SDK initialised once for local runs, its SQLite cache in ``cache_dir``."""
    import flyte
    from flyte._persistence import _db  # no public setting: the path is a module constant

    with _INIT:
        if not _state["init"]:
            flyte.init(log_level=logging.CRITICAL)
            _state["init"] = True
        cache_dir.mkdir(parents=True, exist_ok=True)
        if _state["db"] != str(cache_dir):  # another work directory: reopen the database there
            if _db.LocalDB._conn is not None:
                asyncio.run(_db.LocalDB.close())
            _db.LocalDB.close_sync()
            _db.LocalDB._initialized = False
            _db.DEFAULT_CACHE_DIR = str(cache_dir)
            _state["db"] = str(cache_dir)
            _open_db(_db.LocalDB)
        found = _db.LocalDB._get_cache_dir()
        if not str(found).startswith(str(cache_dir)):  # a .flyte/config.yaml moves it: refuse to write there
            raise CapabilityError(f"flyte2-local: the SDK's config file puts its local cache in {found}",
                                  hint="run without a .flyte/config.yaml in this directory or your home")
    yield


def _open_db(db: Any) -> None:
    """Open the SDK's SQLite connection from a daemon thread, so that aiosqlite's worker
    thread is a daemon too (a thread takes its creator's) and never holds the process at exit;
    each run then uses the connection from its own event loop (``run_here``)."""
    failed: list[BaseException] = []

    def open_() -> None:
        try:
            asyncio.run(db.initialize())
        except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread below
            failed.append(exc)

    opener = threading.Thread(target=open_, name="il-flyte2-db", daemon=True)
    opener.start()
    opener.join()
    if failed:
        raise RunFailed(f"flyte2-local: the SDK's local cache in {db._get_cache_dir()} did not open: {failed[0]}",
                        hint="check that the work directory is writable") from failed[0]


class ItemThreads:
    """The threads a map's items run on (``submit``), as on the local backend, and what
    SIGTERM / SIGINT mean while no step's shim holds the run's thread (its shim handles its
    own): stop the items running on threads, start nothing new (``stop``)."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self.pool = ThreadPoolExecutor(ITEM_THREADS, thread_name_prefix="il-flyte2-item")
        self.stop = stop
        self.running: set[int] = set()  # the threads running an item
        self.lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        return self.pool.submit(self._on_thread, fn)

    def _on_thread(self, fn: Callable[[], Any]) -> Any:
        with self.lock:
            self.running.add(threading.get_ident())
        try:
            return fn()
        except StopRequested as exc:  # reached the item's thread outside its step: it did not run
            raise NotStarted(str(exc)) from exc
        finally:
            with self.lock:
                self.running.discard(threading.get_ident())

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self.pool, self._signals():
            yield

    @contextmanager
    def _signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_signal(signum: int, frame: Any) -> None:
            name = signal.Signals(signum).name
            stop_cls = type("StopRequested", (StopRequested,), {"__init__": lambda e: StopRequested.__init__(e, name)})
            self.stop()
            with self.lock:
                for tid in self.running:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(stop_cls))

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)


ITEM_THREADS = 8  # as the local backend's default map concurrency


def run_here(runner: Any, task: Any, **inputs: Any) -> Any:
    """``runner.run(task, **inputs)`` with the SDK's local run on this thread's own event loop,
    not on the SDK's background loop thread: each step's shim then runs here, inline (its
    signals and SIGALRM timeout as on the local backend), with no hand-off between threads.
    ``Runner.run`` is the SDK's coroutine behind its ``syncify`` wrapper (``__wrapped__``)."""
    run = inspect.unwrap(type(runner).run)
    if not inspect.iscoroutinefunction(run):
        raise RunFailed(f"flyte2-local: this flyte SDK's Runner.run is no coroutine function ({run!r})",
                        hint="install the flyte version pinned in constraints.txt")
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(run(runner, task, **inputs))
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def driver_inputs(spec: PipelineSpec, params: dict[str, Any]) -> dict[str, Any]:
    """The driver task's arguments: primitives as they are, other values as JSON text."""
    return {p.name: params[p.name] if p.type.kind in PRIMITIVES else json.dumps(to_jsonable(revive(params[p.name], p.type), p.type))
            for p in spec.params if p.name in params}


class Flyte2LocalRunner:
    def __init__(self, spec: PipelineSpec, options: RunOptions):
        self.spec, self.options = spec, options

    def run(self, params: dict[str, Any]) -> RunResult:
        import flyte

        spec, options = self.spec, self.options
        started = time.time()
        prefetch_git_info(spec)
        state_dir = state_dir_of(options.run_dir)
        run = RunContext(spec.name, options.run_id, BACKEND, state_dir, retry_in_process=ALL_KINDS,
                         sleeper=options.sleeper, checkpoint_root=options.checkpoint_store)
        store = options.cache_dir / "flyte2"
        module = module_for(spec)
        emitted: set[str] = set()

        def emit(node: str, event: str, detail: str) -> None:
            if event != "started":
                emitted.add(node)
            options.emit(node, event, detail)

        local = LocalRun(run, store, functions=dict(options.functions), emit=emit)
        items = ItemThreads(stop=lambda: setattr(local, "stopped", True))
        local.on_thread = items.submit
        error: BaseException | None = None
        work = options.run_dir / "flyte2"
        with isolated_flyte(store), exported(run.to_env()), local_run(local), live.held(), items.serving():
            runner = flyte.with_runcontext(
                mode="local", raw_data_path=str(work / "raw"), run_base_dir=str(work / "base"),
                disable_run_cache=not options.cache, log_level=logging.CRITICAL,
            )
            try:
                run_here(runner, module.DRIVER, **driver_inputs(spec, params))
            except Exception as exc:  # noqa: BLE001 - a failed step fails the driver; its books say which
                error = exc
        d = local.driver
        if d is None:
            raise RunFailed(f"flyte2-local: the driver task of {spec.name!r} did not start: {error}",
                            pipeline=spec.name) from error
        seen = d.seen
        gates = gate_decisions(spec, d.params, d.outputs)
        outcome = settle(spec, run.state, seen, gates=gates)
        outcome = with_finally(spec, run.state, outcome, seen, gates)
        for name, o in outcome.steps.items():  # what was not told live (skipped, not run)
            if name not in emitted:
                options.emit(name, o.status, f"{o.attempts} attempt(s)" if o.attempts else "")
        outputs = {} if outcome.error else {k: pipeline_output(b, d.params, d.outputs) for k, b in spec.outputs}
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=BACKEND, state_dir=state_dir, params=params, status=outcome.status,
            statuses=outcome.statuses, started=started, fragments=outcome.fragments, outputs=outputs, gates=gates,
        )
        if outcome.error is not None:
            outcome.error.receipt_path = str(receipt)
        return RunResult(spec.name, options.run_id, BACKEND, outcome.status, outputs, outcome.steps, receipt,
                         outcome.error, maps=d.maps)
