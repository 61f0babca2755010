"""Fan-out and fan-in: ``il.map`` over a runtime list, and lists of step outputs as inputs.

A mapped node is one ``Node`` with a ``MapSpec``: the step runs once per item of the list
bound to its *item* input (a pipeline parameter, a step output or a literal list); every
other input is broadcast to all items. Each output port of the step becomes a list, one
element per item, in item order. The compiled graph has one node whatever the list's
length: the list is a runtime value (Flyte array node, KFP ``ParallelFor``).

Per item, the shim runs under the node name ``node[i]`` (``item_node``): its cache key, its
retries, its checkpoint key (``pipeline/run/node[i]``), its receipt fragment and its FATAL
marker are the item's own. When the map is over, ``aggregate`` folds the item fragments
into the node's fragment (status, every item's attempts, ``facts["map"]``: item count, the
failed indices and one entry per item), so that ``settle`` and the receipt need nothing new.

Failure policy: fail fast by default (the first failed item fails the node; items not yet
started are not started). ``tolerate=`` allows up to a number (int >= 1) or a fraction
(0 < float < 1) of failed items: the node then succeeds, its output lists hold ``None`` at
the failed indices (the element type is ``Optional[T]``), and the failed indices are in
``RunResult.maps`` and in the receipt.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import PipelineDefinitionError
from .status import Status
from .types import TypeKind, TypeSpec

if TYPE_CHECKING:
    from .runstate import Fragment, RunState
    from .spec import Node, PipelineSpec


@dataclass(frozen=True)
class MapSpec:
    """How a node fans out: which input takes one item, how many at once, what failure is allowed."""

    item: str  # the input port that receives one item; its binding is the list
    concurrency: int | None = None  # at most this many items at once; None: the backend's default
    tolerate: float = 0  # failed items allowed: an int >= 1 (a count) or a fraction in (0, 1)

    def __post_init__(self) -> None:
        if self.concurrency is not None and (not isinstance(self.concurrency, int) or self.concurrency < 1):
            raise PipelineDefinitionError(f"il.map concurrency={self.concurrency!r} must be a positive int or None")
        t = self.tolerate
        ok = isinstance(t, int | float) and not isinstance(t, bool) and t >= 0 and (t < 1 or float(t).is_integer())
        if not ok:
            raise PipelineDefinitionError(
                f"il.map tolerate={t!r} is neither a count of failed items (an int >= 0) nor a fraction in (0, 1)",
                hint="tolerate=2 allows two failed items; tolerate=0.1 allows 10% of them",
            )

    @property
    def tolerant(self) -> bool:
        return self.tolerate > 0

    def allowed_failures(self, n: int) -> int:
        """How many of ``n`` items may fail with the node still succeeding."""
        if self.tolerate >= 1:
            return int(self.tolerate)
        return math.floor(n * self.tolerate + 1e-9)

    def min_success_ratio(self) -> float | None:
        """The fraction of items that must succeed, where the policy is a fraction (Flyte's form)."""
        return round(1 - self.tolerate, 9) if 0 < self.tolerate < 1 else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"item": self.item}
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        if self.tolerate:
            out["tolerate"] = self.tolerate
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MapSpec:
        return cls(d["item"], d.get("concurrency"), d.get("tolerate", 0))


# -- types -------------------------------------------------------------------------------------
def list_of(t: TypeSpec) -> TypeSpec:
    """``list[t]``; a list of artifacts is its own kind (it moves as files, never as JSON)."""
    kind = TypeKind.ARTIFACTS if t.is_artifact else TypeKind.LIST
    return TypeSpec(kind, args=(t,))


def element_of(t: TypeSpec) -> TypeSpec | None:
    """The element type of a list type (either kind); None for anything else or an untyped list."""
    if t.kind in (TypeKind.LIST, TypeKind.ARTIFACTS) and t.args:
        return t.args[0]
    return None


def mapped_output(t: TypeSpec, m: MapSpec) -> TypeSpec:
    """What a mapped node's output port carries: one element per item, Optional when tolerant."""
    return list_of(dataclasses.replace(t, optional=True) if m.tolerant else t)


def list_binding_type(spec: PipelineSpec, b: Any, type_of_binding: Any) -> TypeSpec | None:
    """The type of a list written in the pipeline body: ``list`` of its items' common type.

    Items of one type give ``list[T]``; ints mixed with floats give ``list[float]``; an
    Optional item makes the element Optional. Anything else has no common type (None).
    """
    # Constants in the list were checked against the element type when it was wired.
    types = [type_of_binding(spec, item) for item in b.items if item.kind != "const"]
    if not types or any(t is None for t in types):
        return None
    elem = types[0]
    for t in types[1:]:
        if t.kind is TypeKind.FLOAT and elem.kind is TypeKind.INT:
            elem = dataclasses.replace(t, optional=elem.optional or t.optional)
        elif dataclasses.replace(t, optional=False) == dataclasses.replace(elem, optional=False) or (
            t.kind is TypeKind.INT and elem.kind is TypeKind.FLOAT
        ):
            elem = dataclasses.replace(elem, optional=elem.optional or t.optional)
        else:
            return None
    return list_of(elem)


# -- names -------------------------------------------------------------------------------------
def item_node(node: str, index: int) -> str:
    """The node name the shim runs item ``index`` under (fragments, markers, checkpoints)."""
    return f"{node}[{index}]"


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

    @property
    def succeeded(self) -> bool:
        return len(self.failed) <= self.allowed_failures

    def to_json(self) -> dict[str, Any]:
        return {"items": self.items, "failed": list(self.failed), "cached": list(self.cached),
                "allowed_failures": self.allowed_failures}


def aggregate(spec: PipelineSpec, state: RunState, node: Node, items: int | None = None) -> MapReport | None:
    """Fold the items' fragments into the mapped node's fragment; None when no item ran.

    ``items``: how many items the list held, when the backend knows (an item that never
    started left no fragment); else the highest index seen + 1.
    """
    from .runstate import Fragment

    assert node.map is not None
    frags = item_fragments(state, node.name)
    if not frags and not items:
        return None
    n = items if items is not None else max(frags) + 1
    failed = [i for i, f in frags.items() if f.status is Status.FAILED]
    cached = [i for i, f in frags.items() if f.status is Status.CACHED]
    report = MapReport(node.name, n, failed, cached, node.map.allowed_failures(n))
    step = spec.step_of(node)
    entries = [
        {"index": i, "node": item_node(node.name, i), "status": str(f.status), "attempts": len(f.attempts),
         "duration_s": f.duration_s}
        for i, f in frags.items()
    ]
    attempts = [a for i, f in frags.items() for a in f.attempts if f.status is not Status.CACHED]
    if report.succeeded and failed:
        # Tolerated: the node succeeded; its failed items stay in the facts, not in its failure.
        attempts = [a for a in attempts if a.failure is None]
    status = Status.SUCCEEDED if report.succeeded else Status.FAILED
    if report.succeeded and frags and len(cached) == len(frags) == n:
        status = Status.CACHED
    starts = [f.started for f in frags.values()] or [0.0]
    ends = [f.ended for f in frags.values()] or [0.0]
    state.write_fragment(Fragment(
        run_id=state.run_id, node=node.name, step=step.name, status=status, fingerprint=step.fingerprint,
        image=step.image, started=min(starts), ended=max(ends), attempts=attempts,
        snapshots=[s for f in frags.values() for s in f.snapshots],
        facts={"map": {**report.to_json(), "entries": entries}},
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


def check_tolerance(report: MapReport, pipeline: str) -> str | None:
    """Why a tolerant map failed (more failed items than allowed), or None."""
    if report.succeeded:
        return None
    return (f"{len(report.failed)} of {report.items} items failed (indices {report.failed}); "
            f"the map allows {report.allowed_failures}")


# -- validation --------------------------------------------------------------------------------
def check_map(spec_name: str, node: str, step: Any, m: MapSpec, over: TypeSpec | None) -> None:
    """A map must name a real input, iterate a typed list of its type, and have one output at most."""
    port = step.input(m.item)
    if port is None:
        raise PipelineDefinitionError(
            f"il.map item={m.item!r} is not an input; inputs are {[p.name for p in step.inputs]}",
            pipeline=spec_name, step=node,
        )
    if over is not None and over.kind is TypeKind.ARTIFACTS:
        raise PipelineDefinitionError(
            f"il.map over a list of artifacts ({over.describe()}) cannot fan out on KFP (ParallelFor iterates "
            "parameters only)",
            pipeline=spec_name, step=node, port=m.item,
            hint="map over a list of ids/paths (str) and load each item inside the step",
        )
    if len(step.outputs) > 1:
        raise PipelineDefinitionError(
            f"il.map of a step with several outputs ({[p.name for p in step.outputs]}): Flyte's map_task "
            "maps single-output tasks only",
            pipeline=spec_name, step=node,
            hint="return one dataclass (its fields travel together) and map that step",
        )
