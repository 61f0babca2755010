"""``il.map`` on the local backend: each item through the shim, at most ``concurrency`` at once.

Items run on threads (the shim is thread-safe per node name; each item has its own name
``node[i]``, so its own cache key, fragment, checkpoint key and FATAL marker). A failed item
does not stop its siblings: every item runs, then the map fails if more items failed than
it tolerates (the same items run on every backend, whatever their order). The shim's timeout and
SIGTERM handling need the main thread: items of a step with a timeout run one at a time
on the main thread, so the timeout still holds.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.errors import StepFailed, StepStopped
from interlock.core.base.status import Status
from interlock.core.model.fanout import item_node
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.values import passed_value
from interlock.core.record.outcomes import Seen
from interlock.core.run import live
from interlock.core.run.cache import LocalCache, cache_key
from interlock.core.run.map_items import MapReport, aggregate
from interlock.core.run.runtime import StopRequested, execute_step, record_cache_hit
from interlock.core.run.state import RunContext

from .outputs import output_failed

DEFAULT_CONCURRENCY = 8


@dataclass
class MapRun:
    outputs: dict[str, Any] | None  # port -> list of values (None at failed items); None if the node failed
    seen: Seen
    report: MapReport | None


def run_map(spec: PipelineSpec, node: Node, inputs: dict[str, Any], run: RunContext, cache: LocalCache,
            options: RunOptions) -> MapRun:
    assert node.map is not None
    m = node.map
    step = spec.step_of(node)
    items = list(inputs[m.item])
    n = len(items)
    results: list[dict[str, Any] | None] = [None] * n
    errors: dict[int, StepFailed] = {}
    stop = threading.Event()
    fn = options.functions.get(step.name)
    use_cache = options.cache and step.cache is not None and step.cache.enabled

    stopped: dict[int, StepStopped] = {}
    running: dict[int, int] = {}  # item index -> the thread running it
    lock = threading.Lock()

    def one(i: int) -> None:
        with lock:
            if stop.is_set():
                return  # the map was stopped: this item never starts (not-run)
            running[i] = threading.get_ident()
        try:
            run_item(i)
        except StopRequested as exc:  # the stop reached the thread outside the step's own call
            stopped[i] = StepStopped(item_node(node.name, i), exc.signal, pipeline=spec.name)
            stop.set()
        finally:
            with lock:
                running.pop(i, None)

    def run_item(i: int) -> None:
        name = item_node(node.name, i)
        item_inputs = {**inputs, m.item: items[i]}
        key = cache_key(step, item_inputs) if use_cache else None
        hit = cache.get(step, key) if key else None
        if hit is not None and key:
            record_cache_hit(run, step, name, cache.provenance(step, key))
            results[i] = hit
            return
        try:
            result = execute_step(run, step, name, item_inputs, fn)
        except StepStopped as exc:  # no new item starts; the map is stopped
            stopped[i] = exc
            stop.set()
            options.emit(name, Status.STOPPED, exc.reason)
            return
        except StepFailed as exc:
            errors[i] = exc
            options.emit(name, Status.FAILED, f"{exc.kind}: {exc.reason}")
            return
        # As between containers, but a JSON value makes its round trip in memory (passed_value).
        values_dir = options.run_dir / "values" / node.name / str(i)
        try:
            results[i] = {p.name: passed_value(result.outputs[p.name], p.type, values_dir / p.name)
                          for p in step.outputs}
        except Exception as exc:  # noqa: BLE001 - an unserializable value, a full disk: the item failed
            errors[i] = output_failed(run, step, name, exc)
            options.emit(name, Status.FAILED, f"{errors[i].kind}: {errors[i].reason}")
            return
        if key:
            cache.put(step, key, results[i] or {},
                      {"run_id": options.run_id, "snapshots": result.snapshots, "facts": result.facts})

    workers = min(m.concurrency or DEFAULT_CONCURRENCY, max(n, 1))
    if step.timeout_s is not None:
        workers = 1
    # Held over the whole map, so that live output is set up once, not once per item.
    with live.capture(node.name):
        if workers == 1:  # on this thread: the shim's own SIGTERM/SIGINT handling stops the item
            for i in range(n):
                one(i)
        else:
            with _stop_items(stop, running, lock), ThreadPoolExecutor(
                    max_workers=workers, thread_name_prefix=f"il-map-{node.name}") as pool:
                for f in [pool.submit(one, i) for i in range(n)]:
                    f.result()
    report = aggregate(spec, run.state, node, n)
    if report is None:  # an empty list: the node succeeded with empty outputs
        report = MapReport(node.name, 0)
    if stopped:  # named as the map, as every backend names it
        first_stop = stopped[min(stopped)]
        return MapRun(None, Seen(Status.STOPPED, error=StepStopped(
            node.name, first_stop.signal, attempts=first_stop.attempts, checkpoint=first_stop.checkpoint,
            pipeline=spec.name, attempt_log=first_stop.attempt_log)), report)
    if not report.succeeded:
        first = errors[min(errors)]
        return MapRun(None, Seen(Status.FAILED, error=first), report)
    outputs = {p.name: [r[p.name] if r is not None else None for r in results] for p in step.outputs}
    status = Status.CACHED if n and len(report.cached) == n else Status.SUCCEEDED
    return MapRun(outputs, Seen(status), report)


@contextmanager
def _stop_items(stop: threading.Event, running: dict[int, int], lock: threading.Lock) -> Iterator[None]:
    """SIGTERM / SIGINT while items run on threads: start no new item and stop the running ones.

    Signal handlers run on the main thread, which only waits for the items here; the shim's
    handler cannot be installed in an item's thread. So this one raises ``StopRequested`` in
    each running item's thread (the shim then records the item STOPPED, as on the main
    thread); CPython delivers it at the thread's next bytecode, so a blocking call (a sleep,
    a read) first returns. Off the main thread (a run started from a thread) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import ctypes

    def on_signal(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        stop_cls = type("StopRequested", (StopRequested,), {"__init__": lambda self: StopRequested.__init__(self, name)})
        with lock:
            stop.set()
            for tid in running.values():
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(stop_cls))

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
