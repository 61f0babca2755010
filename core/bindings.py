"""Resolving bindings to values at run time, for backends that orchestrate in-process."""

from __future__ import annotations

from typing import Any

from .errors import PipelineDefinitionError
from .spec import Binding, PipelineSpec
from .types import TypeSpec
from .values import from_jsonable


def resolve(b: Binding, params: dict[str, Any], outputs: dict[str, dict[str, Any]], t: TypeSpec | None = None) -> Any:
    """The value a binding points at: a parameter, a (field of a) node output, or a constant."""
    if b.kind == "param":
        value = params[b.param or ""]
    elif b.kind == "output":
        value = outputs[b.node or ""][b.port or ""]
        for f in b.field:
            value = value[f] if isinstance(value, dict) else getattr(value, f)
    else:
        value = b.value
    if t is not None and t.kind == "dataclass" and isinstance(value, dict):
        value = from_jsonable(value, t)
    return value


def node_inputs(spec: PipelineSpec, node_name: str, params: dict[str, Any], outputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    node = spec.node(node_name)
    step = spec.step(node.step)
    values = {}
    for name, b in node.inputs:
        port = step.input(name)
        if port is None:
            raise PipelineDefinitionError("unknown argument", pipeline=spec.name, step=node_name, port=name)
        values[name] = resolve(b, params, outputs, port.type)
    for port in step.inputs:
        if port.name not in values and port.has_default:
            values[port.name] = from_jsonable(port.default, port.type) if port.type.kind == "dataclass" else port.default
    return values


def gate_open(spec: PipelineSpec, gate_id: str | None, outputs: dict[str, dict[str, Any]]) -> bool:
    """True when every enclosing il.when condition of a block holds."""
    return all(bool(resolve(g.condition, {}, outputs)) for g in spec.gate_chain(gate_id))
