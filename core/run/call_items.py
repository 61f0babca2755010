"""The items of a mapped sub-pipeline call as its run left them: each body node's item
fragments folded into the node's (``<call>.<step>[i]`` into ``<call>.<step>``), and one
``MapReport`` for the call, the same on every backend that runs the body per item
(core/model/submaps.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from interlock.core.base.status import Status
from interlock.core.model.submaps import item_name
from interlock.core.run.map_items import MapReport, aggregate, item_fragments

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import Node, PipelineSpec
    from interlock.core.model.subcalls import SubCall
    from interlock.core.run.state import RunState


@dataclass
class ItemEnd:
    """How one item of a mapped call ended, as the backend saw it."""

    failed: bool = False  # a body step failed: what followed in the item did not run
    stopped: bool = False  # told to stop
    cached: bool = False  # every body step it ran was a cache hit


def fold_call(spec: PipelineSpec, state: RunState, call: SubCall, body: list[Node], indices: tuple[int, ...],
              ends: list[ItemEnd]) -> tuple[MapReport, dict[str, Status]]:
    """Fold the items of ``call`` (run under the item ``indices`` of the mapped calls around it)
    into each body node's fragment; the call's report and each body node's status (a node that
    no item reached is absent: settle calls it skipped or not run)."""
    assert call.map is not None
    n = len(ends)
    failed = [i for i, e in enumerate(ends) if e.failed and not e.stopped]
    stopped = [i for i, e in enumerate(ends) if e.stopped]
    cached = [i for i, e in enumerate(ends) if e.cached]
    report = MapReport(call.name, n, failed, cached, call.map.allowed_failures(n), stopped)
    statuses: dict[str, Status] = {}
    for node in body:
        level = dataclasses.replace(node, name=item_name(node.name, indices), map=call.map)
        if n and not item_fragments(state, level.name):
            continue
        aggregate(spec, state, level, n)
        frag = state.read_fragment(level.name)
        statuses[node.name] = frag.status if frag is not None else Status.SUCCEEDED
    return report, statuses


def ends_of(state: RunState, body: list[Node], indices: tuple[int, ...], n: int) -> list[ItemEnd]:
    """How each of ``n`` items ended, read from the body nodes' item fragments, for a backend
    that learns it after the run (kfp-local): failed (a body step failed), stopped, or every
    body step it ran a cache hit."""
    ends: list[ItemEnd] = []
    for i in range(n):
        frags = [f for node in body if (f := state.read_fragment(item_name(node.name, (*indices, i)))) is not None]
        ends.append(ItemEnd(
            failed=any(f.status is Status.FAILED for f in frags),
            stopped=any(f.status is Status.STOPPED for f in frags),
            cached=bool(frags) and all(f.status is Status.CACHED for f in frags),
        ))
    return ends
