"""Resolving bindings to values at run time, for backends that orchestrate in-process."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, cast

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import revive
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.submaps import ITEMS
from interlock.core.model.types import TypeSpec

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec


def follow(value: Any, fields: tuple[str, ...]) -> Any:
    """A field path into a dataclass value, or into its JSON object."""
    for f in fields:
        value = value[f] if isinstance(value, dict) else getattr(value, f)
    return value


def _items_of(b: Binding, outputs: Mapping[str, Any]) -> list[Any] | None:
    """A mapped call's items (``outputs["<call>[]"]``, core/model/submaps.py) when ``b`` reads its
    body from outside it; None otherwise."""
    nodes = b.nodes()
    if not nodes or nodes & outputs.keys():
        return None
    # The innermost call's: within one item of a call, the items of a call inside it are there too.
    keys = [k for k in outputs if k.endswith(ITEMS) and all(n.startswith(k[: -len(ITEMS)] + ".") for n in nodes)]
    return list(outputs[max(keys, key=len)]) if keys else None


def made(b: Binding, outputs: Mapping[str, Any]) -> bool:
    """Was what ``b`` reads produced (a node's output, a branch value, a mapped call's items)?"""
    if b.kind is BindingKind.ONE_OF:
        return any(made(o, outputs) for o in b.options)
    if b.kind is BindingKind.LIST:
        return all(made(x, outputs) for x in b.items)
    return b.kind is not BindingKind.OUTPUT or (b.node or "") in outputs or _items_of(b, outputs) is not None


def resolve(b: Binding, params: dict[str, Any], outputs: Mapping[str, dict[str, Any]], t: TypeSpec | None = None) -> Any:
    """The value a binding points at: a parameter, a (field of a) node output, or a constant;
    read from outside a mapped sub-pipeline, a list of its value in each item."""
    items = _items_of(b, outputs) if b.kind in (BindingKind.OUTPUT, BindingKind.ONE_OF) else None
    if items is not None:
        elem = t.args[0] if t is not None and t.args else None
        within = cast("MutableMapping[str, dict[str, Any]]", outputs)  # read only: ChainMap wants a mutable one
        return [None if o is None else resolve(b, params, ChainMap(o, within), elem) for o in items]
    if b.kind is BindingKind.PARAM:
        value = params[b.param or ""]
    elif b.kind is BindingKind.OUTPUT:
        value = follow(outputs[b.node or ""][b.port or ""], b.field)
    elif b.kind is BindingKind.ONE_OF:  # the branch that ran produced its option
        taken = [o for o in b.options if o.nodes() & outputs.keys()]  # a nested chain's value: any of its nodes
        if not taken:
            raise KeyError(f"no branch produced {b.describe()}")
        value = resolve(taken[0], params, outputs)
    elif b.kind is BindingKind.LIST:
        elem = t.args[0] if t is not None and t.args else None
        return [resolve(item, params, outputs, elem) for item in b.items]
    else:
        value = b.value
    return revive(value, t) if t is not None else value


def pipeline_output(b: Binding, params: dict[str, Any], outputs: Mapping[str, dict[str, Any]],
                    t: TypeSpec | None = None) -> Any:
    """A pipeline output's value; None when the step that makes it produced nothing (a join
    whose rule was not met, a step that skipped itself or read a skipped one)."""
    if b.kind is BindingKind.OUTPUT and not made(b, outputs):
        return None
    return resolve(b, params, outputs, t)


def node_inputs(spec: PipelineSpec, node_name: str, params: dict[str, Any], outputs: Mapping[str, dict[str, Any]],
                missing_as_none: bool = False) -> dict[str, Any]:
    """The node's input values. ``missing_as_none``: an output its upstream never produced (a
    skipped or failed step) reads as None, for a join rule that runs the node anyway and for a
    finally step reading the body's outputs (core/model/joins.py; the inputs are Optional)."""
    node = spec.node(node_name)
    step = spec.step(node.step)
    values: dict[str, Any] = {}
    for name, b in node.inputs:
        port = step.input(name)
        if port is None:
            raise PipelineDefinitionError("unknown argument", pipeline=spec.name, step=node_name, port=name)
        t = port.type
        if node.map is not None and name in node.map.ports:
            t = node.map.list_type(port.type)
        if missing_as_none and b.kind is BindingKind.OUTPUT and not made(b, outputs):
            values[name] = None
            continue
        values[name] = resolve(b, params, outputs, t)
    for port in step.inputs:
        if port.name not in values and port.has_default:
            values[port.name] = revive(port.default, port.type)
    return values


def gate_open(spec: PipelineSpec, gate_id: str | None, outputs: dict[str, dict[str, Any]],
              params: dict[str, Any] | None = None) -> bool:
    """True when every enclosing il.when condition of a block holds."""
    from interlock.core.model.conditions import condition_of

    def value_of(b: Binding) -> Any:
        return resolve(b, params or {}, outputs)

    return all(condition_of(g).evaluate(value_of) for g in spec.gate_chain(gate_id))


def gate_decisions(spec: PipelineSpec, params: dict[str, Any], outputs: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """Each gate whose condition could be evaluated (every value it reads was produced), by id."""
    from interlock.core.model.conditions import decide
    from interlock.core.model.submaps import mapped_calls

    per_item = {g for c in mapped_calls(spec) for g in c.gates}  # decided once per item, not for the run
    return {g.id: d for g in spec.gates
            if g.id not in per_item and (d := decide(g, lambda b: resolve(b, params, outputs))) is not None}
