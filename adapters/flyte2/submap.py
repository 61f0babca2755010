"""``il.map`` over a sub-pipeline in the Flyte 2 driver: the call's nested driver task once per
item, awaited together (at most ``concurrency`` at once), as a Flyte 2 user fans a sub-driver out.

Each item's driver gets the caller's books with the item's parameters (``trial[].lr``) and the
item index of each mapped call around it, so its steps run under their item names
(``trial.fit[2]``, core/model/submaps.py). What each item returns (its outputs and how its steps
ended) is gathered into lists, one element per item; the items' fragments fold into each body
step's and into ``RunResult.maps[<call>]`` (core/run/call_items.py), as on every backend.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import StepFailed
from interlock.core.base.status import FailureKind, Status
from interlock.core.model.codecs import to_jsonable
from interlock.core.model.subcalls import call as call_of
from interlock.core.model.submaps import ITEMS, item_param, item_port, items_key, mapped_calls
from interlock.core.record.outcomes import Seen
from interlock.core.run.bindings import gate_open, resolve
from interlock.core.run.call_items import ItemEnd, fold_call
from interlock.core.run.map_items import MapReport

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec
    from interlock.core.model.types import TypeSpec

DEFAULT_CONCURRENCY = 8  # items at once when the map does not say (as the local backend)
_MISSING = (KeyError, AttributeError, TypeError, IndexError)


def param_type(spec: PipelineSpec, name: str) -> TypeSpec:
    """A pipeline parameter's type, or a mapped call's item parameter's (``trial[].lr``)."""
    p = spec.param(name) or item_port(spec, name)
    assert p is not None, name
    return p.type


def call_reports(spec: PipelineSpec, maps: dict[str, MapReport]) -> dict[str, Any]:
    """The mapped calls' reports among a driver's maps, as JSON for its books."""
    calls = {c.name for c in mapped_calls(spec)}
    return {k: r.to_json() for k, r in maps.items() if k in calls}


def read_call_reports(data: dict[str, Any]) -> dict[str, MapReport]:
    return {k: MapReport(k, d["items"], d["failed"], d["cached"], d["allowed_failures"], d["stopped"],
                         d.get("skipped", [])) for k, d in data.items()}


class CallMaps:
    """The driver's part for mapped calls (mixed into ``driver.Driver``, whose books it uses)."""

    spec: Any
    plan: Any
    params: dict[str, Any]
    outputs: dict[str, dict[str, Any]]
    seen: dict[str, Seen]
    maps: dict[str, Any]
    failed: bool
    halted: bool
    downstream: Any
    indices: tuple[int, ...]
    run: Any

    async def call_map(self, name: str, task: Any) -> None:
        """Run mapped call ``name``: its driver task once per item, then fold the items."""
        if self.halted or (self.failed and self.downstream is None):
            return
        c = call_of(self.spec, name)
        m = c.map
        assert m is not None
        if self.downstream is not None and not self.downstream.can_start(c.nodes[0]):
            for x in c.nodes:
                self.downstream.fail(x)
            return
        ports = {p.name: p for p in c.items}
        bound = dict(c.inputs)
        try:
            if not gate_open(self.spec, c.gate, self.outputs, self.params):
                return
            lists = {p: list(resolve(bound[p], self.params, self.outputs, m.list_type(ports[p].type))) for p in m.ports}
        except _MISSING:
            return
        body = [x for x in self.plan.nodes() if x.name in set(c.nodes)]
        lengths = {p: len(v) for p, v in lists.items()}
        if len(set(lengths.values())) > 1:  # no item runs, as on every backend
            error = StepFailed(body[0].name, FailureKind.FATAL, f"il.zip over lists of different lengths {lengths}",
                               hint="zip lists of one length", pipeline=self.spec.name)
            self._down(body[0].name, Seen(Status.FAILED, error=error))  # type: ignore[attr-defined]
            return
        n = lengths[m.item]
        try:  # each item's value of every parameter that takes one (fields=: each field's)
            elements = [m.item_values(lists, i, f"item {i}") for i in range(n)]
        except KeyError as exc:  # an item without a field the map reads: no item runs
            error = StepFailed(body[0].name, FailureKind.FATAL, str(exc.args[0]), pipeline=self.spec.name)
            self._down(body[0].name, Seen(Status.FAILED, error=error))  # type: ignore[attr-defined]
            return
        base = json.loads(self.books())  # type: ignore[attr-defined]
        limit = asyncio.Semaphore(m.concurrency or DEFAULT_CONCURRENCY)
        self._emit(name)  # type: ignore[attr-defined]

        async def one(i: int) -> Any:
            books = {**base, "indices": [*self.indices, i], "params": {**base["params"], **{
                item_param(name, p): to_jsonable(v, ports[p].type) for p, v in elements[i].items()}}}
            async with limit:
                return await task(books=json.dumps(books))

        results = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
        inside = set(c.nodes)
        inside_calls = {x.name for x in self.spec.subs if x.name.startswith(name + ".")}
        ends: list[ItemEnd] = []
        made: list[dict[str, Any]] = []
        for result in results:
            if isinstance(result, BaseException):  # the item's driver task itself failed
                ends.append(ItemEnd(failed=True))
                made.append({})
                continue
            data = json.loads(result)
            ran = {k: Status(v) for k, v in data["seen"].items() if k in inside}
            stopped = data["halted"] or any(s is Status.STOPPED for s in ran.values())
            failed = data["failed"] or any(s is Status.FAILED for s in ran.values())
            cached = bool(ran) and all(s is Status.CACHED for s in ran.values())
            ends.append(ItemEnd(failed, stopped, cached))
            made.append({k: self._values(k, refs) for k, refs in data["outputs"].items()  # type: ignore[attr-defined]
                         if k in inside or (k.endswith(ITEMS) and k[: -len(ITEMS)] in inside_calls)})
        report, statuses = fold_call(self.spec, self.run.state, c, body, self.indices, ends)
        self.maps[name] = report
        for k, st in statuses.items():
            self.seen[k] = Seen(st)
        if not report.succeeded:
            self.failed = True
            self.halted = self.halted or bool(report.stopped)
            if self.downstream is not None:
                for x in c.nodes:
                    self.downstream.fail(x)
            self._emit(name, Status.FAILED, f"{n} item(s)")  # type: ignore[attr-defined]
            return
        # Each item's outputs, None for a failed one: a reader outside resolves in each (core/run/bindings.py).
        items = [None if e.failed else o for e, o in zip(ends, made, strict=True)]
        self.outputs[items_key(name)] = items  # type: ignore[assignment]  # a list under the call's key, not a node's ports
        self._emit(name, Status.SUCCEEDED, f"{n} item(s)")  # type: ignore[attr-defined]
