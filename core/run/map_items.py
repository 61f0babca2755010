"""A map's items as its run left them: each item's fragment, the ``MapReport`` (how many
ran, failed, which indices) and the map's failure tolerance checked against it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from interlock.core.base.status import Status
from interlock.core.model.fanout import item_node

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import Node, PipelineSpec
    from interlock.core.run.records import Fragment
    from interlock.core.run.state import RunState


def _item_pattern(node: str) -> re.Pattern[str]:
    return re.compile(re.escape(node) + r"\[(\d+)\]\.json")


def item_fragments(state: RunState, node: str) -> dict[int, Fragment]:
    """The fragments this run's items of ``node`` wrote, by item index."""
    folder = state.fragment_path(node).parent
    if not folder.is_dir():
        return {}
    pattern = _item_pattern(node)
    found: dict[int, Fragment] = {}
    for entry in folder.iterdir():
        m = pattern.fullmatch(entry.name)
        if m:
            frag = state.read_fragment(entry.name[: -len(".json")])
            if frag is not None:
                found[int(m.group(1))] = frag
    return dict(sorted(found.items()))


# -- outcome -----------------------------------------------------------------------------------
@dataclass
class MapReport:
    """What happened to the items of one mapped node."""

    node: str
    items: int
    failed: list[int] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)
    allowed_failures: int = 0
    stopped: list[int] = field(default_factory=list)  # told to stop while they ran: the map is stopped
    skipped: list[int] = field(default_factory=list)  # skipped themselves (il.Skip): None at their index

    @property
    def succeeded(self) -> bool:
        return not self.stopped and len(self.failed) <= self.allowed_failures

    def to_json(self) -> dict[str, Any]:
        return {"items": self.items, "failed": list(self.failed), "cached": list(self.cached),
                "allowed_failures": self.allowed_failures, "stopped": list(self.stopped),
                **({"skipped": list(self.skipped)} if self.skipped else {})}


def aggregate(spec: PipelineSpec, state: RunState, node: Node, items: int | None = None) -> MapReport | None:
    """Fold the items' fragments into the mapped node's fragment; None when no item ran.

    ``items``: how many items the list held, when the backend knows (an item that never
    started left no fragment); else the highest index seen + 1.
    """
    from interlock.core.run.records import Fragment

    assert node.map is not None
    frags = item_fragments(state, node.name)
    if items is not None:  # a resumed run's list may be shorter: an earlier attempt's extra items are not its own
        frags = {i: f for i, f in frags.items() if i < items}
    if not frags and items is None:
        return None  # an empty list (items == 0) is a map that ran, and succeeded
    n = items if items is not None else max(frags) + 1
    failed = [i for i, f in frags.items() if f.status is Status.FAILED]
    cached = [i for i, f in frags.items() if f.status is Status.CACHED]
    stopped = [i for i, f in frags.items() if f.status is Status.STOPPED]
    skipped = [i for i, f in frags.items() if f.status is Status.SKIPPED]
    report = MapReport(node.name, n, failed, cached, node.map.allowed_failures(n), stopped, skipped)
    step = spec.step_of(node)
    # One entry per item of the list, whatever the backend reached: an item that never
    # started is not-run, so every backend reports the same items.
    entries = [
        {"index": i, "node": item_node(node.name, i), "status": str(f.status), "attempts": len(f.attempts),
         "duration_s": f.duration_s} if (f := frags.get(i)) is not None else
        {"index": i, "node": item_node(node.name, i), "status": str(Status.NOT_RUN), "attempts": 0,
         "duration_s": 0.0}
        for i in range(max(n, max(frags, default=-1) + 1))
    ]
    attempts = [a for i, f in frags.items() for a in f.attempts if f.status is not Status.CACHED]
    if report.succeeded and failed:
        # Tolerated: the node succeeded; its failed items stay in the facts, not in its failure.
        attempts = [a for a in attempts if a.failure is None]
    # A stopped item stops the map (never a success with a made-up None for the item).
    status = Status.SUCCEEDED if report.succeeded else Status.STOPPED if stopped else Status.FAILED
    if report.succeeded and frags and len(cached) == len(frags) == n:
        status = Status.CACHED
    starts = [f.started for f in frags.values()] or [0.0]
    ends = [f.ended for f in frags.values()] or [0.0]
    state.write_fragment(Fragment(
        run_id=state.run_id, node=node.name, step=step.name, status=status, fingerprint=step.fingerprint,
        image=step.image, started=min(starts), ended=max(ends), attempts=attempts,
        snapshots=[s for f in frags.values() for s in f.snapshots],
        facts={"map": {**report.to_json(), "entries": entries},
               **({"stopped_by": frags[stopped[0]].facts.get("stopped_by")} if stopped else {})},
        resources=step.resources.to_json(),
    ))
    return report


def reports(spec: PipelineSpec, state: RunState, sizes: dict[str, int] | None = None) -> dict[str, MapReport]:
    """Aggregate every mapped node that ran; the backends call this before ``settle``."""
    out: dict[str, MapReport] = {}
    for node in spec.nodes:
        if node.map is not None:
            r = aggregate(spec, state, node, (sizes or {}).get(node.name))
            if r is not None:
                out[node.name] = r
    return out


def first_failure(state: RunState, node: str, items: int | None = None) -> Fragment | None:
    """The fragment of the failed item with the lowest index (below ``items``, the list's
    length, where known): what a failed map's error names (under the map's own name, on every
    backend), with that item's own attempts."""
    return next((f for i, f in item_fragments(state, node).items()
                 if f.status is Status.FAILED and (items is None or i < items)), None)


def check_tolerance(report: MapReport, pipeline: str) -> str | None:
    """Why a tolerant map failed (more failed items than allowed), or None."""
    if report.succeeded:
        return None
    return (f"{len(report.failed)} of {report.items} items failed (indices {report.failed}); "
            f"the map allows {report.allowed_failures}")
