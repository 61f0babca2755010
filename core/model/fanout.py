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

Failure policy: a failed item fails the node by default, once every item has run (a failed
item does not stop its siblings, so the same items run, and are reported, on every backend
whatever their order or concurrency). ``tolerate=`` allows up to a number (an int: 2) or a
fraction (a float: 0.1; 1.0 is every item) of failed items: the node then succeeds, its output lists hold ``None`` at
the failed indices (the element type is ``Optional[T]``), and the failed indices are in
``RunResult.maps`` and in the receipt.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import TypeKind
from interlock.core.model.types import TypeSpec

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec


@dataclass(frozen=True)
class MapSpec:
    """How a node fans out: which input takes one item, how many at once, what failure is allowed."""

    item: str  # the input port that receives one item; its binding is the list
    concurrency: int | None = None  # at most this many items at once; None: the backend's default
    # failed items allowed: an int is a count (2: two items), a float a fraction in (0, 1]
    # (0.1: a tenth of them; 1.0: all of them), told apart by type as Python does
    tolerate: int | float = 0
    # il.zip: the other input ports bound to a list each, zipped with ``item``'s (same length)
    zipped: tuple[str, ...] = ()
    # fields= (core/model/map_fields.py): each item a record, (field, input port) pairs; ``item``
    # is the first field's port, bound to the list of records of type ``record``
    fields: tuple[tuple[str, str], ...] = ()
    record: TypeSpec | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None and (not isinstance(self.concurrency, int) or self.concurrency < 1):
            raise PipelineDefinitionError(f"il.map concurrency={self.concurrency!r} must be a positive int or None")
        t = self.tolerate
        if isinstance(t, bool) or not isinstance(t, int | float):
            raise PipelineDefinitionError(
                f"il.map tolerate={t!r} must be a count of failed items (an int) or a fraction of them (a float)",
                hint="tolerate=2 allows two failed items; tolerate=0.1 a tenth of them; tolerate=1.0 all of them",
            )
        if isinstance(t, int) and t < 0:
            raise PipelineDefinitionError(f"il.map tolerate={t!r}: a count of failed items cannot be negative")
        if isinstance(t, float) and not 0.0 <= t <= 1.0:
            whole = f"tolerate={int(t)} (an int) for {int(t)} items" if t > 1 and t.is_integer() else "an int for a count"
            raise PipelineDefinitionError(
                f"il.map tolerate={t!r}: a float is a fraction of the items, from 0.0 to 1.0",
                hint=f"write {whole}, or a fraction such as tolerate=0.1 (1.0: every item may fail)",
            )

    @property
    def ports(self) -> tuple[str, ...]:
        """Every input port that takes one element per item (``item``, then the zipped ones)."""
        return (self.item, *self.zipped)

    @property
    def takes(self) -> tuple[str, ...]:
        """Every input port that gets a value per item (a field's port, with ``fields=``)."""
        return tuple(p for _, p in self.fields) if self.fields else self.ports

    def list_type(self, port_type: TypeSpec) -> TypeSpec:
        """What the list bound to the item port is: of records with ``fields=``, else of the port's type."""
        return list_of(self.record) if self.fields and self.record is not None else list_of(port_type)

    def item_values(self, lists: dict[str, list[Any]], i: int, where: str) -> dict[str, Any]:
        """Item ``i``'s value of each port that takes one (``lists``: the mapped lists, by port)."""
        if self.fields:
            from interlock.core.model.map_fields import field_of

            return {port: field_of(lists[self.item][i], f, where) for f, port in self.fields}
        return {p: v[i] for p, v in lists.items()}

    @property
    def tolerant(self) -> bool:
        return self.tolerate > 0

    @property
    def tolerates_a_count(self) -> bool:
        """``tolerate`` is a number of items (an int), not a fraction."""
        return isinstance(self.tolerate, int) and self.tolerate > 0

    def allowed_failures(self, n: int) -> int:
        """How many of ``n`` items may fail with the node still succeeding."""
        if isinstance(self.tolerate, int):
            return self.tolerate
        return math.floor(n * self.tolerate + 1e-9)

    def min_success_ratio(self) -> float | None:
        """The fraction of items that must succeed, where the policy is a fraction (Flyte's form)."""
        return round(1 - self.tolerate, 9) if isinstance(self.tolerate, float) and self.tolerate > 0 else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"item": self.item}
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        if self.tolerate:
            out["tolerate"] = self.tolerate
        if self.zipped:
            out["zip"] = list(self.zipped)
        if self.fields:
            out["fields"] = [list(f) for f in self.fields]
            out["record"] = self.record.to_json() if self.record is not None else None
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MapSpec:
        record = TypeSpec.from_json(d["record"]) if d.get("record") else None
        return cls(d["item"], d.get("concurrency"), d.get("tolerate", 0), tuple(d.get("zip", ())),
                   tuple((f, p) for f, p in d.get("fields", ())), record)


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


def mapped_output(t: TypeSpec, m: MapSpec, may_skip: bool = False) -> TypeSpec:
    """What a mapped node's output port carries: one element per item, Optional when tolerant
    or when an item may skip itself (il.Skip: None at its index)."""
    return list_of(dataclasses.replace(t, optional=True) if m.tolerant or may_skip else t)


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














# -- validation --------------------------------------------------------------------------------
def check_map(spec_name: str, node: str, step: Any, m: MapSpec, over: TypeSpec | dict[str, TypeSpec | None] | None
              ) -> None:
    """A map must name real inputs, iterate typed lists of their types, and have one output at most.
    ``over``: the type of the list bound to the item port, or (a zip) each mapped port's."""
    overs = over if isinstance(over, dict) else {m.item: over}
    for name in m.ports:
        if step.input(name) is None:
            raise PipelineDefinitionError(
                f"il.map item={name!r} is not an input; inputs are {[p.name for p in step.inputs]}",
                pipeline=spec_name, step=node,
            )
        t = overs.get(name)
        if t is not None and t.kind is TypeKind.ARTIFACTS:
            raise PipelineDefinitionError(
                f"il.map over a list of artifacts ({t.describe()}) cannot fan out on KFP (ParallelFor iterates "
                "parameters only)",
                pipeline=spec_name, step=node, port=name,
                hint="map over a list of ids/paths (str) and load each item inside the step",
            )
    if len(set(m.ports)) != len(m.ports):
        raise PipelineDefinitionError(f"il.map maps input(s) twice: {list(m.ports)}", pipeline=spec_name, step=node)
    if len(step.outputs) > 1:
        raise PipelineDefinitionError(
            f"il.map of a step with several outputs ({[p.name for p in step.outputs]}): Flyte's map_task "
            "maps single-output tasks only",
            pipeline=spec_name, step=node,
            hint="return one dataclass (its fields travel together) and map that step",
        )
