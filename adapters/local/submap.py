"""``il.map`` over a sub-pipeline on the local backend: the call's body once per item.

Items run on threads, at most ``concurrency`` at once (one at a time on the main thread when a
body step has a timeout, as for a mapped step). Within an item the body's nodes run in plan
order under their item names (``trial.fit[2]``, core/model/submaps.py): an il.when block inside
is decided per item, a mapped step inside runs as a map of its own (``trial.fan[2][0]``), a
mapped sub-pipeline inside recurses. A failed step ends its item (what follows in the item is
not run) and never its siblings: every item runs, then the call fails if more items failed than
it tolerates. Each body node's items fold into its fragment (``run/map_items.aggregate``), and
the call's items into one ``MapReport`` (``RunResult.maps[<call>]``).
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from interlock.core.backend.plan import Plan
from interlock.core.backend.protocol import RunOptions
from interlock.core.base.errors import StepFailed, StepSkipped, StepStopped
from interlock.core.base.status import Status
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.subcalls import SubCall
from interlock.core.model.submaps import item_name, item_param, items_key, maps_around
from interlock.core.model.values import passed_value
from interlock.core.record.outcomes import Seen
from interlock.core.run.bindings import gate_open, made, node_inputs, resolve
from interlock.core.run.cache import LocalCache, cache_key
from interlock.core.run.call_items import ItemEnd, fold_call
from interlock.core.run.map_items import MapReport
from interlock.core.run.output_failure import output_failed
from interlock.core.run.runtime import StopRequested, execute_step, record_cache_hit
from interlock.core.run.state import RunContext

from .fanout import DEFAULT_CONCURRENCY, Finished, run_map, stop_items


@dataclass
class CallMapRun:
    outputs: dict[str, Any]  # {"<call>[]": one {node: {port: value}} per item}; empty when the call failed
    seen: dict[str, Seen]  # each body node, as its items ended
    report: MapReport
    stopped: bool = False

    @property
    def succeeded(self) -> bool:
        return self.report.succeeded and not self.stopped


@dataclass
class _Item:
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: bool = False
    stopped: bool = False
    ran: int = 0
    cached: int = 0


class CallMap:
    """One mapped call, run under the item indices of the mapped calls around it (``indices``)."""

    def __init__(self, spec: PipelineSpec, plan: Plan, call: SubCall, run: RunContext, cache: LocalCache,
                 options: RunOptions, indices: tuple[int, ...] = ()):
        assert call.map is not None
        self.spec, self.plan, self.call, self.m = spec, plan, call, call.map
        self.run_ctx, self.cache, self.options, self.indices = run, cache, options, indices
        inside = set(call.nodes)
        self.body = [n for n in plan.nodes() if n.name in inside]
        self.depth = len(maps_around(spec, self.body[0].name)) if self.body else 0
        self.stop = threading.Event()
        self._finished: dict[str, Finished] = {}  # per body step: its items done in this run (a resume keeps them)
        self._lock = threading.Lock()

    def run(self, params: dict[str, Any], outputs: dict[str, dict[str, Any]]) -> CallMapRun:
        ports = {p.name: p for p in self.call.items}
        bound = dict(self.call.inputs)
        lists = {p: list(resolve(bound[p], params, outputs, self.m.list_type(ports[p].type))) for p in self.m.ports}
        lengths = {p: len(v) for p, v in lists.items()}
        n = lengths[self.m.item]
        if len(set(lengths.values())) > 1:  # no item runs, as for a mapped step
            report = MapReport(self.call.name, n, list(range(n)), allowed_failures=self.m.allowed_failures(n))
            first = self.body[0]
            error = StepFailed(first.name, *_zip_error(lengths), pipeline=self.spec.name)
            return CallMapRun({}, {first.name: Seen(Status.FAILED, error=error)}, report)
        try:  # each item's value of every parameter that takes one (fields=: each field's)
            elements = [{item_param(self.call.name, p): v for p, v in self.m.item_values(lists, i, f"item {i}").items()}
                        for i in range(n)]
        except KeyError as exc:  # an item without a field the map reads: no item runs
            report = MapReport(self.call.name, n, list(range(n)), allowed_failures=self.m.allowed_failures(n))
            first = self.body[0]
            error = StepFailed(first.name, _zip_error({})[0], str(exc.args[0]), pipeline=self.spec.name)
            return CallMapRun({}, {first.name: Seen(Status.FAILED, error=error)}, report)
        items = [_Item() for _ in range(n)]
        running: dict[int, int] = {}  # item index -> the thread running it (a stop reaches each)
        lock = threading.Lock()

        def one(i: int) -> None:
            with lock:
                if self.stop.is_set():
                    return  # stopped: this item never starts (not run)
                running[i] = threading.get_ident()
            try:
                self._item(i, {**params, **elements[i]}, outputs, items[i])
            except StopRequested:  # the stop reached the thread outside a step's own call
                items[i].stopped = True
                self.stop.set()
            finally:
                with lock:
                    running.pop(i, None)

        workers = min(self.m.concurrency or DEFAULT_CONCURRENCY, max(n, 1))
        if any(self.spec.step_of(x).timeout_s is not None for x in self.body):
            workers = 1  # the shim's timeout needs the main thread
        if workers == 1:
            for i in range(n):
                one(i)
        else:
            with stop_items(self.stop, running, lock), ThreadPoolExecutor(
                    max_workers=workers, thread_name_prefix=f"il-map-{self.call.name}") as pool:
                for f in [pool.submit(one, i) for i in range(n)]:
                    try:
                        f.result()
                    except StopRequested:  # delivered to an item's thread just outside its step: stopped
                        pass
        return self._settle(n, items)

    # -- one item --------------------------------------------------------------------------------
    def _item(self, i: int, params: dict[str, Any], outer: dict[str, dict[str, Any]], item: _Item) -> None:
        names = (*self.indices, i)
        seen_out: dict[str, dict[str, Any]] = dict(outer)
        done: set[str] = set()  # mapped calls inside, already run for this item
        for node in self.body:
            inner = maps_around(self.spec, node.name)[self.depth:]
            if inner:  # a mapped sub-pipeline inside this body: its own items, under this item's index
                c = inner[0]
                if c.name in done:
                    continue
                done.add(c.name)
                if not _gate(self.spec, c.gate, seen_out, params):
                    continue
                sub = CallMap(self.spec, self.plan, c, self.run_ctx, self.cache, self.options, names).run(
                    params, seen_out)
                if not sub.succeeded:
                    item.failed, item.stopped = True, sub.stopped
                    return
                item.ran += 1
                seen_out.update(sub.outputs)
                item.outputs.update(sub.outputs)
                continue
            if not _gate(self.spec, node.gate, seen_out, params):
                continue  # a block closed for this item
            if _reads_missing(node, seen_out):
                continue  # reads what this item never made (a closed block, a skipped step)
            inputs = node_inputs(self.spec, node.name, params, seen_out)
            name = item_name(node.name, names)
            values = self._node(node, name, inputs, item, i)
            if values is None:
                if item.failed or item.stopped:
                    return  # a failed step ends its item
                continue
            seen_out[node.name] = values
            item.outputs[node.name] = values

    def _done(self, node: Node) -> Finished:
        """The items of body step ``node`` that succeeded earlier in this run (``values/<node>/finished.jsonl``)."""
        level = item_name(node.name, self.indices)
        with self._lock:
            if level not in self._finished:
                step = self.spec.step_of(node)
                # Every input is the item's own here: the key hashes them all.
                self._finished[level] = Finished(self.options.run_dir / "values" / level, step,
                                                 tuple(p.name for p in step.inputs), {})
            return self._finished[level]

    def _node(self, node: Node, name: str, inputs: dict[str, Any], item: _Item, i: int) -> dict[str, Any] | None:
        step = self.spec.step_of(node)
        opts = self.options
        item.ran += 1
        if node.map is not None:  # a mapped step inside the body: a map of its own, per item
            mapped = run_map(self.spec, dataclasses.replace(node, name=name), inputs, self.run_ctx, self.cache, opts)
            if mapped.outputs is None:
                item.failed, item.stopped = True, mapped.seen.status is Status.STOPPED
                if item.stopped:
                    self.stop.set()
                return None
            if mapped.seen.status is Status.CACHED:
                item.cached += 1
            return mapped.outputs
        done = self._done(node)
        earlier = done.earlier(i, inputs, self.run_ctx, name)
        if earlier is not None:  # succeeded in an earlier attempt of this run, with these inputs
            opts.emit(name, Status.SUCCEEDED, "done in an earlier attempt of this run")
            return earlier
        use_cache = opts.cache and step.cache is not None and step.cache.enabled
        key = cache_key(step, inputs) if use_cache else None
        hit = self.cache.get(step, key) if key else None
        if hit is not None and key:
            record_cache_hit(self.run_ctx, step, name, self.cache.provenance(step, key))
            opts.emit(name, Status.CACHED, key[:12])
            item.cached += 1
            return hit
        try:
            result = execute_step(self.run_ctx, step, name, inputs, opts.functions.get(step.name))
        except StepStopped as exc:
            item.stopped = True
            self.stop.set()
            opts.emit(name, Status.STOPPED, exc.reason)
            return None
        except StepFailed as exc:
            item.failed = True
            opts.emit(name, Status.FAILED, f"{exc.kind}: {exc.reason}")
            return None
        except StepSkipped as exc:
            opts.emit(name, Status.SKIPPED, exc.why)
            return None
        values_dir = done.folder / str(i)  # where a resume finds what is not JSON (Finished)
        try:
            values = {p.name: passed_value(result.outputs[p.name], p.type, values_dir / p.name) for p in step.outputs}
            done.add(i, done.key(inputs), values)
        except Exception as exc:  # noqa: BLE001 - an unserializable value, a full disk: the item failed
            error = output_failed(self.run_ctx, step, name, exc)
            item.failed = True
            opts.emit(name, Status.FAILED, f"{error.kind}: {error.reason}")
            return None
        if key:
            self.cache.put(step, key, values, {"run_id": opts.run_id, "snapshots": result.snapshots,
                                               "facts": result.facts})
        opts.emit(name, Status.SUCCEEDED, "")
        return values

    # -- the call's outcome ----------------------------------------------------------------------
    def _settle(self, n: int, items: list[_Item]) -> CallMapRun:
        ends = [ItemEnd(it.failed, it.stopped, bool(it.ran) and it.cached == it.ran) for it in items]
        report, statuses = fold_call(self.spec, self.run_ctx.state, self.call, self.body, self.indices, ends)
        outputs: dict[str, Any] = {}
        if report.succeeded:  # each item's outputs, None for a failed one (a reader resolves in each)
            outputs[items_key(self.call.name)] = [None if it.failed else it.outputs for it in items]
        return CallMapRun(outputs, {k: Seen(v) for k, v in statuses.items()}, report,
                          stopped=bool(report.stopped))


def _reads_missing(node: Node, outputs: dict[str, dict[str, Any]]) -> bool:
    """Does ``node`` read an output that was not made (a branch value: no branch made one)?"""
    return not all(made(b, outputs) for _, b in node.inputs)


def _gate(spec: PipelineSpec, gate: str | None, outputs: dict[str, dict[str, Any]], params: dict[str, Any]) -> bool:
    try:
        return gate_open(spec, gate, outputs, params)
    except KeyError:  # its condition reads what was never made
        return False


def _zip_error(lengths: dict[str, int]) -> tuple[Any, str]:
    from interlock.core.base.status import FailureKind

    return FailureKind.FATAL, f"il.zip over lists of different lengths {lengths}"
