"""The driver task's books: what the generated driver body (``render.py``) calls at run time.

The body is the lowered plan as Python: each ``il.when`` block an ``if``, a chain an
``if``/``elif``, a map its items' tasks awaited together, every step an ``await``. ``Driver`` holds what the run
produced so far and answers, per step, the same questions the local backend asks in plan
order: may it start (the failure policy, ``Downstream`` under ``"continue"``), is its block's
condition true, what are its inputs. After the body it runs the ``il.finally_`` steps with
their scope's status, settled from the shim's fragments as on every backend.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from interlock.core.backend.failure_scope import Downstream
from interlock.core.backend.plan import lower
from interlock.core.base.errors import StepFailed, StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.model.attempts import Tries, attempt_spec, fallback_inputs, fallback_of, handled
from interlock.core.model.codecs import TypeKind, from_jsonable, revive, to_jsonable
from interlock.core.model.failure_policy import CONTINUE
from interlock.core.model.fanout import item_node
from interlock.core.model.finally_blocks import (
    RunStatus,
    block_gate,
    block_of,
    block_spec,
    finally_inputs,
    handler_runs,
    is_handler,
    reached,
)
from interlock.core.model.joins import AFTER_FAILURE, READS_MISSING, join_decision, rule_of
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.submaps import ITEMS, item_name
from interlock.core.model.types import TypeSpec
from interlock.core.record.outcomes import Seen, run_status, settle
from interlock.core.run.bindings import gate_decisions, gate_open, node_inputs, pipeline_output
from interlock.core.run.map_items import MapReport, aggregate
from interlock.core.run.runtime import record_cache_hit

from . import values
from .submap import CallMaps, call_reports, param_type, read_call_reports
from .task import current_local, run_context, value_store

DEFAULT_CONCURRENCY = 8  # items at once when the map does not say (as the local backend)
# A condition or an input on a value the run never produced (its step failed or was skipped).
_MISSING = (KeyError, AttributeError, TypeError, IndexError)


class Driver(CallMaps):
    def __init__(self, spec: PipelineSpec, params: dict[str, Any], store: str, *, nested: bool = False):
        self.spec, self.store = spec, value_store(store)
        self.plan = lower(spec)
        self.params = {p.name: revive(from_jsonable(params[p.name], p.type) if isinstance(params[p.name], dict | list)
                                      else params[p.name], p.type) for p in spec.params if p.name in params}
        self.outputs: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, Seen] = {}
        self.maps: dict[str, MapReport] = {}
        self.sizes: dict[str, int] = {}
        self.failed = self.halted = False
        self.tries = Tries(spec)  # il.attempt() blocks: which failed (top level only: no nested driver needs it)
        self._closed: set[str] = set()  # the blocks whose finally step ran as the block ended (close)
        self._given: set[str] = set()  # a nested driver: the nodes its caller had reached
        self._given_seen: dict[str, Status] = {}  # and how they ended (for the join rules)
        self.downstream = Downstream(self.plan) if spec.failure_policy == CONTINUE else None
        # An item driver of a mapped sub-pipeline (submap.py): the item index of each mapped call
        # around it, outermost first; its steps run under their item names (trial.fit[2]).
        self.indices: tuple[int, ...] = ()
        self.local = current_local()
        self.run = run_context(spec, store)
        if self.local is not None and not nested:
            self.local.driver = self  # the runner reads the books after the run

    # -- the body -------------------------------------------------------------------------
    def opens(self, gate: str) -> bool:
        """Does the block behind ``gate`` run (its conditions, those around it included, hold)?"""
        if self.halted or (self.failed and self.downstream is None):
            return False
        try:
            return gate_open(self.spec, gate, self.outputs, self.params)
        except _MISSING:
            return False

    async def step(self, name: str, task: Any) -> None:
        """Run node ``name``'s task, if it may start; a map's items side by side."""
        node = self.spec.node(name)
        inputs = self._ready(node)
        if inputs is None:
            return
        if node.map is not None:
            await self._map(node, task, inputs)
            return
        step = self.spec.step_of(node)
        backup = fallback_of(self.spec, name)
        if backup is not None:  # the attempt's il.RunStatus, settled from the run state
            inputs = fallback_inputs(self.spec, name, inputs,
                                     run_status(settle(attempt_spec(self.spec, backup), self.run.state, None)))
        refs = {p.name: values.put(self.store, inputs[p.name], p.type) for p in step.inputs if p.name in inputs}
        rt = item_name(name, self.indices)  # the name its shim runs under
        try:
            # A step of a mapped call's body runs under its item's name, which its task takes.
            out = await (task(node=rt, **refs) if self.indices else task(**refs))
        except Exception as exc:  # noqa: BLE001 - the task failed: the shim said why, in its fragment
            why = self._skipped(rt)
            if why is not None:  # il.Skip: skipped; what reads it follows its join rule
                self.seen[name] = Seen(Status.SKIPPED)
                self._emit(rt, Status.SKIPPED, why)
                return
            self._failed(name, exc, rt)
            return
        self.outputs[name] = self._read(step, out)
        ran = self.local is None or rt in self.local.started
        if not ran:  # served from the SDK's cache: no fragment (as flyte-local), the status says so
            if self.indices:
                record_cache_hit(self.run, step, rt, {})  # the item's fragment says so, for its call's fold
            self._emit(rt, Status.CACHED, step.fingerprint[:12])
        else:
            self._emit(rt, Status.SUCCEEDED, self.local.done.get(rt, "") if self.local is not None else "")
        self.seen[name] = Seen(Status.SUCCEEDED if ran else Status.CACHED)

    def _ready(self, node: Node) -> dict[str, Any] | None:
        """The node's inputs when it may start; None when it may not (nothing is recorded:
        settle calls it not-run, or skipped behind a closed gate)."""
        if self.halted or (self.failed and self.downstream is None):
            return None
        why_not = self.tries.blocked(node.name)  # il.attempt(): after its failure, or a fallback not needed
        if why_not is not None:
            if why_not == "skipped":
                self.seen[node.name] = Seen(Status.SKIPPED)
            self._emit(node.name, why_not, "the attempt failed" if why_not == "not-run" else "the attempt succeeded")
            return None
        rule = rule_of(node)
        if self.downstream is not None and not self.downstream.can_start(node.name) and rule not in AFTER_FAILURE:
            self.downstream.fail(node.name)
            return None
        try:
            if not gate_open(self.spec, node.gate, self.outputs, self.params):
                return None
            blocked = join_decision(node, self._status_of)  # run_if (core/model/joins.py)
            if blocked is not None:
                status, why = blocked
                if status is Status.SKIPPED:
                    self.seen[node.name] = Seen(Status.SKIPPED)
                elif self.downstream is not None:
                    self.downstream.fail(node.name)
                self._emit(node.name, status, why)
                return None
            return node_inputs(self.spec, node.name, self.params, self.outputs, missing_as_none=rule in READS_MISSING)
        except _MISSING:  # it reads what never ran: it cannot start either
            if self.downstream is not None:
                self.downstream.fail(node.name)
            return None

    def _skipped(self, name: str) -> str | None:
        """Why the node's task skipped itself (il.Skip), from its fragment; None if it did not."""
        frag = self.run.state.read_fragment(name)
        return str(frag.facts.get("skipped", "")) if frag is not None and frag.status is Status.SKIPPED else None

    def _status_of(self, node: str) -> Status:
        """How an upstream ended: as seen, else not-run behind a failure, else skipped (a closed gate)."""
        if node in self.seen:
            return self.seen[node].status
        if node in self._given_seen:  # a nested driver: reached by its caller
            return self._given_seen[node]
        return Status.NOT_RUN if self.downstream is not None and node in self.downstream.down else Status.SKIPPED

    async def _map(self, node: Node, task: Any, inputs: dict[str, Any]) -> None:
        m = node.map
        assert m is not None
        step = self.spec.step_of(node)
        lists = {p: list(inputs[p]) for p in m.ports}
        lengths = {p: len(v) for p, v in lists.items()}
        if len(set(lengths.values())) > 1:  # no item runs, as on every backend
            error = StepFailed(node.name, FailureKind.FATAL, f"il.zip over lists of different lengths {lengths}",
                               hint="zip lists of one length", pipeline=self.spec.name)
            self._down(node.name, Seen(Status.FAILED, error=error))
            return
        n = lengths[m.item]
        self.sizes[node.name] = n
        types = {p.name: p.type for p in step.inputs}
        base = {k: values.put(self.store, v, types[k]) for k, v in inputs.items() if k in types and k not in m.takes}
        names = [item_node(item_name(node.name, self.indices), i) for i in range(n)]
        try:  # each item's value of every port that takes one (fields=: of each field's input)
            per_item = [m.item_values(lists, i, f"item {i}") for i in range(n)]
        except KeyError as exc:  # an item without a field: no item runs, as on every backend
            self._down(node.name, Seen(Status.FAILED, error=StepFailed(
                node.name, FailureKind.FATAL, str(exc.args[0]), pipeline=self.spec.name)))
            return
        columns = [[values.put(self.store, item[p], types[p]) for item in per_item] for p in m.takes]
        self._emit(node.name)
        # Each item its own task call, awaited together (Flyte 2's fan-out), at most `concurrency`
        # at once. Not flyte.map: with broadcast inputs it maps one parameter only (functools.partial),
        # and an item also needs its own node name.
        limit = asyncio.Semaphore(m.concurrency or DEFAULT_CONCURRENCY)

        async def one(i: int) -> Any:
            async with limit:
                return await task(node=names[i], **base, **{p: columns[j][i] for j, p in enumerate(m.takes)})

        results = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
        outs: list[dict[str, Any] | None] = []
        stopped: StepStopped | None = None
        for item, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):  # failed, stopped, or skipped itself (None at its index)
                err = self.local.raised.get(item) if self.local is not None else None
                if isinstance(err, StepStopped) and stopped is None:
                    stopped = err
                outs.append(None)
                continue
            if self.local is not None and item not in self.local.started:
                record_cache_hit(self.run, step, item, {})
            outs.append(self._read(step, result))
        level = replace(node, name=item_name(node.name, self.indices))  # in a mapped call's item: its own name
        report = aggregate(self.spec, self.run.state, level, n) or MapReport(node.name, 0)
        self.maps[node.name] = report
        if stopped is not None:
            self.halted = True
            self._down(node.name, Seen(Status.STOPPED, error=StepStopped(
                node.name, stopped.signal, attempts=stopped.attempts, checkpoint=stopped.checkpoint,
                pipeline=self.spec.name, attempt_log=stopped.attempt_log)))
            return
        if not report.succeeded:
            self._down(node.name, Seen(Status.FAILED))
            return
        self.outputs[node.name] = {p.name: [o[p.name] if o is not None else None for o in outs] for p in step.outputs}
        status = Status.CACHED if n and len(report.cached) == n else Status.SUCCEEDED
        self.seen[node.name] = Seen(status)
        self._emit(node.name, status, f"{n} item(s)")

    # -- sub-pipeline calls: a nested driver task each ------------------------------------------
    async def call(self, name: str, task: Any) -> None:
        """Run sub-pipeline call ``name`` as its own driver task, handing it the books and
        taking back what its steps did."""
        if self.halted or (self.failed and self.downstream is None):
            return
        try:
            returned = await task(books=self.books())
        except Exception as exc:  # noqa: BLE001 - the nested driver itself failed: its steps are not run
            raise RuntimeError(f"sub-pipeline call {name!r}: {exc}") from exc
        self.merge(returned)

    def books(self, skip: set[str] | frozenset[str] = frozenset()) -> str:
        """What a nested driver task needs to go on: the parameters, every output so far (as
        references), the failures and what they keep from starting; ``skip``: nodes left out."""
        return json.dumps({
            "params": {k: to_jsonable(v, param_type(self.spec, k)) for k, v in self.params.items()},
            "indices": list(self.indices),
            "outputs": {n: self._refs(n, v) for n, v in self.outputs.items() if n not in skip},
            "failed": self.failed, "halted": self.halted,
            "down": sorted(self.downstream.down) if self.downstream is not None else [],
            "failed_scopes": sorted(self.downstream.failed_scopes) if self.downstream is not None else [],
            "seen": {n: s.status.value for n, s in self.seen.items() if n not in skip},
            "sizes": self.sizes, "closed": sorted(self._closed),
            "call_maps": call_reports(self.spec, self.maps),  # a mapped call's items, for the caller's RunResult.maps
        })

    @classmethod
    def resume(cls, spec: PipelineSpec, books: str, store: str) -> Driver:
        """A nested driver, from its caller's books: it returns only what it adds."""
        data = json.loads(books)
        d = cls(spec, data["params"], store, nested=True)
        d.indices = tuple(data.get("indices", ()))
        for k, v in data["params"].items():  # a mapped call's item parameters (trial[].lr)
            if k not in d.params:
                t = param_type(spec, k)
                d.params[k] = revive(from_jsonable(v, t), t)
        d.outputs = {n: d._values(n, refs) for n, refs in data["outputs"].items()}
        d.failed, d.halted = data["failed"], data["halted"]
        if d.downstream is not None:
            d.downstream.down.update(data["down"])
            d.downstream.failed_scopes.update(data["failed_scopes"])
        d._given = set(data["outputs"]) | set(data["seen"])
        d._given_seen = {n: Status(st) for n, st in data["seen"].items()}
        d._closed = set(data.get("closed", ()))
        return d

    def returned(self) -> str:
        """The nested driver's books, for its caller: the nodes it reached."""
        return self.books(skip=self._given)

    def merge(self, returned: str) -> None:
        data = json.loads(returned)
        self.outputs.update({n: self._values(n, refs) for n, refs in data["outputs"].items()})
        self.failed, self.halted = self.failed or data["failed"], self.halted or data["halted"]
        if self.downstream is not None:
            self.downstream.down.update(data["down"])
            self.downstream.failed_scopes.update(data["failed_scopes"])
        self.sizes.update(data["sizes"])
        self._closed.update(data.get("closed", ()))
        self.maps.update(read_call_reports(data.get("call_maps", {})))
        for name, status in data["seen"].items():
            st = Status(status)
            if st in (Status.FAILED, Status.STOPPED):
                seen = self._seen_failed(name, RuntimeError("failed in its sub-pipeline's driver task"))
                self.seen[name] = seen if st is Status.FAILED or seen.status is Status.STOPPED else Seen(st)
            else:
                self.seen[name] = Seen(st)
            node = self.spec.node(name)
            if node.map is not None and name in self.sizes:
                self.maps[name] = aggregate(self.spec, self.run.state, node, self.sizes[name]) or MapReport(name, 0)

    def _refs(self, node: str, values_: Any) -> Any:
        if node.endswith(ITEMS):  # a mapped call's items: each item's outputs (None: a failed item)
            return [None if o is None else {k: self._refs(k, v) for k, v in o.items()} for o in values_]
        types = self._output_types(node)
        return {port: values.put(self.store, v, types[port]) for port, v in values_.items()}

    def _values(self, node: str, refs: Any) -> Any:
        if node.endswith(ITEMS):
            return [None if o is None else {k: self._values(k, r) for k, r in o.items()} for o in refs]
        types = self._output_types(node)
        return {port: values.get(self.store, ref, types[port]) for port, ref in refs.items()}

    def _output_types(self, node: str) -> dict[str, Any]:
        n = self.spec.node(node)
        step = self.spec.step_of(n)
        if n.map is None:
            return {p.name: p.type for p in step.outputs}
        # A map's output: the list of its items' values (None at a failed item).
        return {p.name: TypeSpec(TypeKind.LIST, args=(replace(p.type, optional=True),)) for p in step.outputs}

    async def close(self, name: str, task: Any) -> None:
        """A ``with il.finally_`` block's finally step, as the block ends (the driver's ``finally:``
        around the block, a call's driver too: the books hand it back): what follows it waits for
        it, and does not start if it failed."""
        spec = self.spec
        block = block_of(spec, name)
        if block is None:
            return
        halted, self.halted = self.halted, False  # a stopped block still runs its finally step
        if self.local is not None:
            stopped, self.local.stopped = self.local.stopped, False
        reach = settle(block_spec(spec, block), self.run.state, self.seen,
                       gates=gate_decisions(spec, self.params, self.outputs))
        self._closed.add(name)
        if reached(spec, block, reach.steps):
            await self._finally(block.node, task, run_status(settle(block_spec(spec, block), self.run.state, None)))
        self.halted = halted
        if self.local is not None:
            self.local.stopped = stopped
        if name in self.seen and self.seen[name].status is Status.FAILED:
            self.failed = True

    # -- after the body ---------------------------------------------------------------------
    async def finish(self, tasks: dict[str, Any]) -> None:
        """The il.finally_ steps, after the body: each block's the run reached (its status
        settled from the fragments), then the whole pipeline's."""
        spec = self.spec
        if not spec.finally_nodes():
            return
        if self.local is not None:
            self.local.stopped = False  # a stopped body still runs its finally steps, which see the stop
        gates = gate_decisions(spec, self.params, self.outputs)
        outcome = settle(spec, self.run.state, self.seen, gates=gates)
        for block in spec.finally_blocks:
            if block.node.name in self._closed:  # run as its block ended (close)
                continue
            gate = block_gate(spec, block)
            try:
                taken = gate is None or gate_open(spec, gate, self.outputs, self.params)
            except _MISSING:
                taken = False
            if taken and reached(spec, block, outcome.steps):
                status = run_status(settle(block_spec(spec, block), self.run.state, None))
                await self._finally(block.node, tasks[block.node.name], status)
        if spec.finally_ is not None:
            await self._finally(spec.finally_, tasks[spec.finally_.name], run_status(outcome))

    async def _finally(self, node: Node, task: Any, status: RunStatus) -> None:
        if is_handler(self.spec, node.name) and not handler_runs(status):
            return  # il.on_failure: its scope did not fail (listed as skipped)
        step = self.spec.step_of(node)
        inputs = finally_inputs(self.spec, node, node_inputs(self.spec, node.name, self.params, self.outputs,
                                                             missing_as_none=True), status)
        refs = {p.name: values.put(self.store, inputs[p.name], p.type) for p in step.inputs if p.name in inputs}
        self._emit(node.name, "started", f"finally ({status.status})")
        try:
            await task(**refs)
        except Exception as exc:  # noqa: BLE001 - recorded as the node's failure
            seen = self._seen_failed(node.name, exc)
            self.seen[node.name] = seen
            self._emit(node.name, Status.FAILED, f"{seen.error.kind}: {seen.error.reason}" if seen.error else str(exc))
            return
        self.seen[node.name] = Seen(Status.SUCCEEDED)
        self._emit(node.name, Status.SUCCEEDED, "finally")

    def result(self) -> str:
        """The pipeline's outputs as references; a failed run fails the driver task (and the Flyte run)."""
        ok = handled(self.spec)  # a failure in an il.attempt() block: its fallback handled it
        if self.failed or any(s.status in (Status.FAILED, Status.STOPPED) and n not in ok for n, s in self.seen.items()):
            failed = [n for n, s in self.seen.items() if s.status in (Status.FAILED, Status.STOPPED) and n not in ok]
            raise RuntimeError(f"pipeline {self.spec.name!r} failed: {', '.join(failed) or 'a step failed'}")
        types = dict(self.spec.output_types)
        return json.dumps({k: values.put(self.store, pipeline_output(b, self.params, self.outputs), types[k])
                           for k, b in self.spec.outputs})

    # -- books ------------------------------------------------------------------------------
    def _read(self, step: Any, out: str) -> dict[str, Any]:
        refs = json.loads(out)
        return {p.name: values.get(self.store, refs[p.name], p.type) for p in step.outputs}

    def _failed(self, name: str, exc: BaseException, rt: str | None = None) -> None:
        rt = rt or name
        if self.local is not None and self.local.stopped and rt not in self.local.started:
            self.halted = True  # told to stop before it started: not run
            return
        seen = self._seen_failed(rt, exc)
        self._down(name, seen)
        err = seen.error
        self._emit(rt, seen.status, err.reason if isinstance(err, StepStopped) else
                   f"{err.kind}: {err.reason}" if err is not None else str(exc))

    def _seen_failed(self, name: str, exc: BaseException) -> Seen:
        err = self.local.raised.get(name) if self.local is not None else None
        frag = self.run.state.read_fragment(name)
        if isinstance(err, StepStopped) or (frag is not None and frag.status is Status.STOPPED):
            return Seen(Status.STOPPED, error=err)
        shim_ran = self.local is None or name in self.local.started
        return Seen(Status.FAILED, error=err, shim_ran=shim_ran, detail=f"the Flyte 2 task failed: {exc}")

    def _down(self, name: str, seen: Seen) -> None:
        self.seen[name] = seen
        if seen.status is Status.FAILED and self.tries.record_failure(name):
            return  # tried in an il.attempt() block: handled, its fallback runs next
        self.failed = True
        self.halted = self.halted or seen.status is Status.STOPPED  # told to stop: nothing starts
        if self.downstream is not None:
            self.downstream.fail(name)

    def _emit(self, name: str, event: str = "started", detail: str = "") -> None:
        if self.local is not None:
            self.local.emit(name, event, detail)
