"""``il.map`` on the local backend: each item through the shim, at most ``concurrency`` at once.

Items run on threads (the shim is thread-safe per node name; each item has its own name
``node[i]``, so its own cache key, fragment, checkpoint key and FATAL marker). A failed item
does not stop its siblings: every item runs, then the map fails if more items failed than
it tolerates (the same items run on every backend, whatever their order). The shim's timeout and
SIGTERM handling need the main thread: items of a step with a timeout run one at a time
on the main thread, so the timeout still holds.
"""

from __future__ import annotations

import hashlib
import json
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.errors import StepFailed, StepSkipped, StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.model.codecs import from_jsonable, json_text
from interlock.core.model.fanout import item_node
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.spec import StepSpec
from interlock.core.model.values import moves_as_json, passed_value, read_value, value_hash
from interlock.core.record.outcomes import Seen
from interlock.core.run import live
from interlock.core.run.cache import LocalCache, cache_key
from interlock.core.run.map_items import MapReport, aggregate
from interlock.core.run.output_failure import output_failed
from interlock.core.run.runtime import StopRequested, execute_step, record_cache_hit
from interlock.core.run.state import RunContext

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
    # Each item: one element of every mapped list (il.zip maps several, element i of each).
    lists = {p: list(inputs[p]) for p in m.ports}
    lengths = {p: len(v) for p, v in lists.items()}
    if len(set(lengths.values())) > 1:  # no item runs, as on Flyte (its array node refuses the lists)
        error = StepFailed(node.name, FailureKind.FATAL, f"il.zip over lists of different lengths {lengths}",
                           hint="zip lists of one length", pipeline=spec.name)
        return MapRun(None, Seen(Status.FAILED, error=error), None)  # no item ran: no map report
    n = lengths[m.item]
    try:
        items = [m.item_values(lists, i, f"item {i}") for i in range(n)]
    except KeyError as exc:  # fields=: an item without a field (an untyped dict); no item runs
        error = StepFailed(node.name, FailureKind.FATAL, str(exc.args[0]), pipeline=spec.name,
                           hint="give every item the fields the map reads, or type the list's records")
        return MapRun(None, Seen(Status.FAILED, error=error), None)
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

    finished = Finished(options.run_dir / "values" / node.name, step, m.takes, inputs)

    def run_item(i: int) -> None:
        name = item_node(node.name, i)
        earlier = finished.earlier(i, items[i], run, name)
        if earlier is not None:  # succeeded in an earlier attempt of this run, with these inputs
            results[i] = earlier
            options.emit(name, Status.SUCCEEDED, "done in an earlier attempt of this run")
            return
        item_inputs = {**inputs, **items[i]}
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
        except StepSkipped as exc:  # il.Skip: None at its index, counted in the map's report
            options.emit(name, Status.SKIPPED, exc.why)
            return
        # As between containers, but a JSON value makes its round trip in memory (passed_value).
        values_dir = options.run_dir / "values" / node.name / str(i)
        try:
            results[i] = {p.name: passed_value(result.outputs[p.name], p.type, values_dir / p.name)
                          for p in step.outputs}
            finished.add(i, finished.key(items[i]), results[i] or {})
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
            with stop_items(stop, running, lock), ThreadPoolExecutor(
                    max_workers=workers, thread_name_prefix=f"il-map-{node.name}") as pool:
                for f in [pool.submit(one, i) for i in range(n)]:
                    try:
                        f.result()
                    except StopRequested:  # delivered to an item's thread just outside its step: stopped
                        pass
    report = aggregate(spec, run.state, node, n)
    if report is None:  # an empty list: the node succeeded with empty outputs
        report = MapReport(node.name, 0)
    if stopped:  # named as the map, as every backend names it
        first_stop = stopped[min(stopped)]
        return MapRun(None, Seen(Status.STOPPED, error=StepStopped(
            node.name, first_stop.signal, attempts=first_stop.attempts, checkpoint=first_stop.checkpoint,
            pipeline=spec.name, attempt_log=first_stop.attempt_log)), report)
    if not report.succeeded:  # settle names the map with its first failed item
        return MapRun(None, Seen(Status.FAILED), report)
    outputs = {p.name: [r[p.name] if r is not None else None for r in results] for p in step.outputs}
    status = Status.CACHED if n and len(report.cached) == n else Status.SUCCEEDED
    return MapRun(outputs, Seen(status), report)


@contextmanager
def stop_items(stop: threading.Event, running: dict[int, int], lock: threading.Lock) -> Iterator[None]:
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


class Finished:
    """The items of one map that succeeded in this run, one line each in ``finished.jsonl``
    (append-only, beside the items' value folders): running the run again (a resume) keeps
    them, as it keeps finished steps, when the step's code and the item's inputs are the same.

    A line holds the item's index, the key of its inputs and each output: the JSON text of a
    kind that moves as JSON (the map hands those over in memory: no file per item), else the
    note that its value folder holds it. A line torn by a kill is skipped (the item runs again).
    """

    FILE = "finished.jsonl"

    def __init__(self, folder: Path, step: StepSpec, ports: tuple[str, ...], inputs: dict[str, Any]):
        self.folder, self.step = folder, step
        self.ports = [p for p in step.inputs if p.name in ports]
        # Hashed once for the map, not once per item: a broadcast DataFrame is hashed one time.
        self.base = json.dumps({"fingerprint": step.fingerprint, "inputs": {
            p.name: value_hash(inputs.get(p.name, p.default), p.type) for p in step.inputs if p.name not in ports}},
            sort_keys=True)
        self.lock = threading.Lock()
        self.lines: dict[int, dict[str, Any]] = {}
        path = folder / self.FILE
        if path.is_file():
            for text in path.read_text().splitlines():
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                self.lines[line["i"]] = line

    def key(self, value: dict[str, Any]) -> str:
        """``value``: the item's element of each mapped list, by port."""
        own = "".join(value_hash(value[p.name], p.type) for p in self.ports)
        return hashlib.sha256((self.base + own).encode()).hexdigest()

    def earlier(self, i: int, value: dict[str, Any], run: RunContext, name: str) -> dict[str, Any] | None:
        line = self.lines.get(i)
        if line is None or line["key"] != self.key(value):
            return None
        frag = run.state.read_fragment(name)
        if frag is None or frag.status not in (Status.SUCCEEDED, Status.CACHED):
            return None
        try:
            return {p.name: (None if (out := line["out"][p.name]) is None else
                             read_value(p.type, self.folder / str(i) / p.name) if out is True else
                             from_jsonable(json.loads(out), p.type))
                    for p in self.step.outputs}
        except (OSError, KeyError, ValueError):  # a value folder gone: run the item again
            return None

    def add(self, i: int, key: str, outputs: dict[str, Any]) -> None:
        out = {p.name: None if outputs.get(p.name) is None else
               json_text(outputs[p.name], p.type) if moves_as_json(p.type) else True
               for p in self.step.outputs}
        text = json.dumps({"i": i, "key": key, "out": out}) + "\n"
        with self.lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / self.FILE, "a") as f:
                f.write(text)
