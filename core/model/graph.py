"""Whole-graph checks and ordering: the validation every backend gets, before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model import fanout
from interlock.core.model.codecs import TypeKind
from interlock.core.model.conditions import condition_of
from interlock.core.model.names import check_step_name
from interlock.core.model.pipeline_spec import Gate, Node, PipelineSpec
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.types import TypeSpec, assignable


def _gate_conditions(gate_id: str | None, gates: dict[str, Gate], *, pipeline: str, node: str) -> set[str]:
    """Nodes whose outputs decide whether a block runs (every enclosing il.when)."""
    out: set[str] = set()
    seen: set[str] = set()
    while gate_id:
        if gate_id in seen:
            raise PipelineDefinitionError(f"gate {gate_id!r} is nested in itself", pipeline=pipeline, step=node)
        seen.add(gate_id)
        g = gates.get(gate_id)
        if g is None:  # validate() reports unknown gates; ordering alone cannot use them
            break
        out |= {b.node for b in condition_of(g).bindings() if b.kind is BindingKind.OUTPUT and b.node}
        gate_id = g.parent
    return out


def topological_order(nodes: Iterable[Node], *, pipeline: str = "", gates: Iterable[Gate] = ()) -> list[Node]:
    """Kahn's algorithm, stable in declaration order; raises on a cycle naming its members.

    A node inside an ``il.when`` block also depends on the nodes its conditions read: a
    backend runs nodes in this order and must know the condition before it reaches the block.
    """
    nodes = list(nodes)
    gate_map = {g.id: g for g in gates}
    by_name: dict[str, Node] = {}
    for n in nodes:
        if n.name in by_name:
            raise PipelineDefinitionError("duplicate node name", pipeline=pipeline, step=n.name)
        by_name[n.name] = n
    indeg = {n.name: 0 for n in nodes}
    children: dict[str, list[str]] = {n.name: [] for n in nodes}
    for n in nodes:
        deps = n.upstream() | _gate_conditions(n.gate, gate_map, pipeline=pipeline, node=n.name)
        for up in sorted(deps):
            if up not in by_name:
                raise PipelineDefinitionError(f"depends on unknown node {up!r}", pipeline=pipeline, step=n.name)
            indeg[n.name] += 1
            children[up].append(n.name)
    ready = [n.name for n in nodes if indeg[n.name] == 0]
    order: list[Node] = []
    while ready:
        cur = ready.pop(0)
        order.append(by_name[cur])
        for c in children[cur]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    if len(order) != len(nodes):
        stuck = sorted(k for k, v in indeg.items() if v > 0)
        raise PipelineDefinitionError(f"cycle between steps {stuck}", pipeline=pipeline, step=stuck[0])
    return order


def binding_type(spec: PipelineSpec, b: Binding) -> TypeSpec | None:
    if b.kind is BindingKind.ONE_OF:
        return binding_type(spec, b.options[0]) if b.options else None
    if b.kind is BindingKind.PARAM:
        from interlock.core.model.submaps import item_port

        p = spec.param(b.param or "") or item_port(spec, b.param or "")
        return p.type if p else None
    if b.kind is BindingKind.LIST:
        return fanout.list_binding_type(spec, b, binding_type)
    if b.kind is BindingKind.OUTPUT:
        port = spec.step_of(b.node or "").output(b.port or "")
        t = port.type if port else None
        node = spec.node(b.node or "")
        if t is not None and node.map is not None:
            t = fanout.mapped_output(t, node.map, spec.step_of(node).may_skip)
        for f in b.field:
            t = t.field_type(f) if t else None
        return t
    return None


def validate(spec: PipelineSpec) -> PipelineSpec:
    """Re-check a spec from any source (a decorator, or JSON) and return it in topological order.

    The builder already checks edges as they are wired; this pass also covers specs that were
    edited or deserialized, and whole-graph properties (cycles, unknown references, gates).
    """
    name = spec.name
    step_names = {s.name for s in spec.steps}
    if len(step_names) != len(spec.steps):
        raise PipelineDefinitionError("duplicate step definitions", pipeline=name)
    for s in spec.steps:
        check_step_name(s.name, pipeline=name)
    from interlock.core.model.subcalls import check_node_name, validate_subs
    from interlock.core.model.submaps import lifted

    for n in spec.nodes:  # a second call's node ("train-2") may outgrow the limit; "sub.node" is qualified
        check_node_name(n.name, pipeline=name)
    validate_subs(spec)
    node_names = {n.name for n in spec.nodes}
    gate_ids = {g.id for g in spec.gates}
    for n in spec.nodes:
        if n.step not in step_names:
            raise PipelineDefinitionError(f"unknown step {n.step!r}", pipeline=name, step=n.name)
        step = spec.step(n.step)
        bound = n.bindings
        for port in step.inputs:
            if port.name not in bound and not port.has_default and not (n.map is not None and port.name in n.map.takes):
                raise PipelineDefinitionError(
                    f"missing required input of type {port.type.describe()}", pipeline=name, step=n.name, port=port.name
                )
        for pname, b in n.inputs:
            target = step.input(pname)
            if target is None:
                raise PipelineDefinitionError("unknown argument", pipeline=name, step=n.name, port=pname)
            unknown = sorted(b.nodes() - node_names)
            if unknown:
                raise PipelineDefinitionError(f"reads unknown node {unknown[0]!r}", pipeline=name, step=n.name, port=pname)
            src = lifted(spec, b, binding_type(spec, b), n.name)  # a mapped call's output outside it: a list
            if b.kind is not BindingKind.CONST and src is None:
                raise PipelineDefinitionError(f"{b.describe()} does not exist", pipeline=name, step=n.name, port=pname)
            want = target.type
            if n.map is not None and pname in n.map.ports:
                want = n.map.list_type(target.type)  # the item input is bound to the whole list
            if src is not None and not assignable(src, want):
                raise PipelineDefinitionError(
                    f"type mismatch: {b.describe()} is {src.describe()}, but the input expects {want.describe()}",
                    pipeline=name, step=n.name, port=pname,
                )
        if n.map is not None:
            fanout.check_map(name, n.name, step, n.map, {
                p: binding_type(spec, n.bindings[p]) if p in bound else None for p in n.map.ports})
        if n.gate is not None and n.gate not in gate_ids:
            raise PipelineDefinitionError(f"unknown gate {n.gate!r}", pipeline=name, step=n.name)
    for g in spec.gates:
        if g.parent is not None and g.parent not in gate_ids:
            raise PipelineDefinitionError(f"gate {g.id} is nested in unknown gate {g.parent!r}", pipeline=name)
        if g.follows is not None and (g.follows not in gate_ids or spec.gate(g.follows).parent != g.parent):
            raise PipelineDefinitionError(f"gate {g.id} follows {g.follows!r}, not a block of its scope", pipeline=name)
        cond = condition_of(g)
        for b in cond.bindings():
            known = b.node in node_names if b.kind is BindingKind.OUTPUT else binding_type(spec, b) is not None
            if not known or binding_type(spec, b) is None:
                raise PipelineDefinitionError(f"gate {g.id} condition reads unknown {b.describe()}", pipeline=name)
        for leaf in _bool_leaves(cond):
            t = binding_type(spec, leaf)
            if t is None or t.kind is not TypeKind.BOOL:
                raise PipelineDefinitionError(f"gate {g.id} condition {leaf.describe()} is not a bool output", pipeline=name)
    for out_name, b in spec.outputs:
        if b.kind is BindingKind.OUTPUT and b.node in node_names and spec.node(b.node or "").gate is not None:
            raise PipelineDefinitionError(
                f"pipeline output {out_name!r} comes from {b.describe()}, inside an il.when block",
                pipeline=name, hint="return only outputs of steps that always run",
            )
    from interlock.core.model.joins import check_joins, check_run_if

    for n in (*spec.nodes, *spec.finally_nodes()):
        if n.run_if is not None:
            check_run_if(n.run_if, pipeline=name, step=n.name)
    check_joins(spec)
    order = topological_order(spec.nodes, pipeline=name, gates=spec.gates)
    return spec if [n.name for n in order] == [n.name for n in spec.nodes] else _reorder(spec, order)


def _bool_leaves(cond: Any) -> list[Binding]:
    """Operands used as bools on their own (not compared with anything)."""
    from interlock.core.model.conditions import Op

    if cond.op is Op.REF:
        return list(cond.operands)
    return [b for t in cond.terms for b in _bool_leaves(t)]


def _reorder(spec: PipelineSpec, order: list[Node]) -> PipelineSpec:
    return dataclasses.replace(spec, nodes=tuple(order))
