"""``flyte2-local``: the compiled module, imported, its driver run in the `flyte` SDK's local mode.

What runs is what ``interlock compile --backend flyte2`` writes (``render.py``), with the
run's work directory as its value store and the shim's in-process retries. The SDK runs the
driver on its event loop thread; each step's shim runs on the thread that started the run
(``MainThread``), one at a time in plan order, as on the local backend. The SDK keeps its local cache and run records in a
SQLite file under ``~/.flyte/`` by default: here it is the work directory's
(``<workdir>/cache/flyte2/local-cache``), so runs never touch the user's home.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import logging
import queue
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
# imported once: a rerun skips rendering and importing it. Keyed by the spec object (held
# here, so its id is not reused) and the value store.
_MODULES: OrderedDict[tuple[int, str], tuple[PipelineSpec, ModuleType]] = OrderedDict()
_MODULES_MAX = 8
_LOCK = threading.Lock()


def module_for(spec: PipelineSpec, store: Path) -> ModuleType:
    key = (id(spec), str(store))
    with _LOCK:
        held = _MODULES.get(key)
        if held is not None and held[0] is spec:
            return held[1]
    # One step after another in plan order, so that a failure stops the same steps as on local.
    source = render(spec, store=str(store), in_process=ALL_KINDS, backend=BACKEND, concurrent=False,
                    triggers=False)  # interlock watch starts the runs here
    name = f"interlock_flyte2_{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is None:  # executed from memory: nothing is left in the work directory
        module = ModuleType(name)
        sys.modules[name] = module
        exec(compile(source, f"<flyte2 module of {spec.name}>", "exec"), module.__dict__)  # noqa: S102 - ours
    with _LOCK:
        _MODULES[key] = (spec, module)
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
        found = _db.LocalDB._get_cache_dir()
        if not str(found).startswith(str(cache_dir)):  # a .flyte/config.yaml moves it: refuse to write there
            raise CapabilityError(f"flyte2-local: the SDK's config file puts its local cache in {found}",
                                  hint="run without a .flyte/config.yaml in this directory or your home")
    yield


class MainThread:
    """Runs the steps' shim on the thread that started the run, while the SDK's event loop
    runs the driver on its own: there the shim's SIGTERM/SIGINT handling (checkpoint, then
    stop) and its SIGALRM timeout work as on the local backend. A map's items run on threads
    (``threaded``), as on the local backend; a signal then stops the running items and
    starts no other (``stop``)."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self.jobs: queue.Queue[tuple[Callable[[], Any], Future[Any], bool]] = queue.Queue()
        self.stop = stop
        self.running: set[int] = set()  # the threads running an item
        self.lock = threading.Lock()

    def submit(self, fn: Callable[[], Any], threaded: bool = False) -> Future[Any]:
        future: Future[Any] = Future()
        self.jobs.put((fn, future, threaded))
        return future

    def serve(self, until: Future[Any]) -> None:
        with ThreadPoolExecutor(ITEM_THREADS, thread_name_prefix="il-flyte2-item") as pool, self._signals():
            while not (until.done() and self.jobs.empty()):
                try:
                    fn, future, threaded = self.jobs.get(timeout=0.01)
                except queue.Empty:
                    continue
                if threaded:
                    pool.submit(self._on_thread, fn, future)
                elif future.set_running_or_notify_cancel():
                    _settle(future, fn)

    def _on_thread(self, fn: Callable[[], Any], future: Future[Any]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        with self.lock:
            self.running.add(threading.get_ident())
        try:
            _settle(future, fn)
        finally:
            with self.lock:
                self.running.discard(threading.get_ident())

    @contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGTERM / SIGINT while no step runs on this thread (its shim handles its own):
        stop the items running on threads, start nothing new."""
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


def _settle(future: Future[Any], fn: Callable[[], Any]) -> None:
    try:
        future.set_result(fn())
    except StopRequested as exc:  # reached the item's thread outside its step: it did not run
        future.set_exception(NotStarted(str(exc)))
    except BaseException as exc:  # noqa: BLE001 - handed to the task that asked
        future.set_exception(exc)


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
        module = module_for(spec, store)
        emitted: set[str] = set()

        def emit(node: str, event: str, detail: str) -> None:
            if event != "started":
                emitted.add(node)
            options.emit(node, event, detail)

        local = LocalRun(run, functions=dict(options.functions), emit=emit)
        main = MainThread(stop=lambda: setattr(local, "stopped", True))
        local.main = main.submit
        error: BaseException | None = None
        work = options.run_dir / "flyte2"
        with isolated_flyte(store), exported(run.to_env()), local_run(local), live.held():
            runner = flyte.with_runcontext(
                mode="local", raw_data_path=str(work / "raw"), run_base_dir=str(work / "base"),
                disable_run_cache=not options.cache, log_level=logging.CRITICAL,
            )
            with ThreadPoolExecutor(1, thread_name_prefix="il-flyte2") as pool:
                done = pool.submit(runner.run, module.DRIVER, **driver_inputs(spec, params))
                main.serve(done)
            try:
                done.result()
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
