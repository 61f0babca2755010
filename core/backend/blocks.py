"""Structured order: every ``il.when`` block as one contiguous run of nodes.

A topological order alone may interleave two sibling blocks (``a1 b1 a2 b2``). Backends that
open a native scope per contiguous run (KFP's ``dsl.If``) would then split one block into
several scopes and refuse the edges between them. This order keeps each block together,
nested blocks inside their parent, and still puts every node after all it reads from.
"""

from __future__ import annotations

import heapq

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.chains import chain_of, head_of
from interlock.core.model.pipeline_spec import Node, PipelineSpec


def gate_reads(spec: PipelineSpec, gate_id: str) -> set[str]:
    """Nodes whose outputs a gate's condition reads."""
    from interlock.core.model.conditions import condition_of

    return {b.node for b in condition_of(spec.gate(gate_id)).bindings() if b.node}


def structured_order(spec: PipelineSpec) -> list[Node]:
    """``spec.nodes`` reordered so that each block is contiguous (stable, dependency-safe)."""
    index = {n.name: i for i, n in enumerate(spec.nodes)}
    # A sub-pipeline call is a scope too ("sub:<call>"): kept together, as KFP emits it as one task.
    chains = {n.name: scope_keys(spec, n) for n in spec.nodes}
    calls = [SUB + c.name for c in spec.subs]
    gate_first: dict[str, int] = {}
    for n in spec.nodes:
        for g in chains[n.name]:
            gate_first.setdefault(g, index[n.name])
    nested = {g.id: {c.id for c in spec.gates if g.id in _ancestors(spec, c.id)} for g in spec.gates}
    for c in spec.subs:
        nested[SUB + c.name] = set(c.gates)

    # An il.when/il.elif_/il.otherwise chain stays together too (KFP's dsl.Elif must follow
    # its dsl.If directly): its blocks form one unit, named by the chain's first block.
    heads = {g.id: head_of(spec, g.id) for g in spec.gates} | {c: c for c in calls}
    members = {h: [g.id for g in chain_of(spec, h)] if h not in calls else [h] for h in set(heads.values())}
    for h, ms in members.items():
        gate_first[h] = min((gate_first[m] for m in ms if m in gate_first), default=gate_first.get(h, 0))

    # A unit of a scope is one of its own nodes ("n", name) or a block nested in it ("g", head id).
    def unit_of(node: str, depth: int) -> tuple[str, str]:
        chain = chains[node]
        return ("g", heads[chain[depth]]) if len(chain) > depth else ("n", node)

    def order(scope: str | None, depth: int) -> list[Node]:
        in_scope = [n.name for n in spec.nodes
                    if len(chains[n.name]) >= depth and (chains[n.name][depth - 1] if depth else None) == scope]
        units: dict[tuple[str, str], set[str]] = {}  # unit -> the nodes it holds
        for m in in_scope:
            units.setdefault(unit_of(m, depth), set()).add(m)
        member_unit = {m: unit_of(m, depth) for m in in_scope}
        deps: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for u, held in units.items():
            ups: set[str] = set()
            for m in held:
                ups |= spec.node(m).upstream()
            if u[0] == "g":  # a block also waits for its condition and those of blocks inside it
                for m in members[u[1]]:
                    for g in ({m} if m not in calls else set()) | nested[m]:
                        ups |= gate_reads(spec, g)
            deps[u] = {member_unit[x] for x in ups if x in member_unit and member_unit[x] != u}
        rank = {u: gate_first[u[1]] if u[0] == "g" else index[u[1]] for u in units}
        waiting = {u: len(d) for u, d in deps.items()}
        readers: dict[tuple[str, str], list[tuple[str, str]]] = {u: [] for u in units}
        for u, d in deps.items():
            for up in d:
                readers[up].append(u)
        ready = [(rank[u], u) for u in units if not waiting[u]]
        heapq.heapify(ready)
        out: list[Node] = []
        done = 0
        while ready:
            _, u = heapq.heappop(ready)
            done += 1
            if u[0] == "g":
                for m in members[u[1]]:
                    out.extend(order(m, depth + 1))
            else:
                out.append(spec.node(u[1]))
            for r in readers[u]:
                waiting[r] -= 1
                if not waiting[r]:
                    heapq.heappush(ready, (rank[r], r))
        if done < len(units):
            stuck = sorted(u for u, w in waiting.items() if w)
            raise PipelineDefinitionError(f"il.when blocks depend on each other in a cycle: {stuck}", pipeline=spec.name)
        return out

    result = order(None, 0)
    assert len(result) == len(spec.nodes), "structured order lost a node"
    return result


def _ancestors(spec: PipelineSpec, gate_id: str) -> list[str]:
    return [g.id for g in spec.gate_chain(gate_id)][:-1]


SUB = "sub:"  # a sub-pipeline call's scope key; a gate's is its id


def scope_keys(spec: PipelineSpec, node: Node) -> list[str]:
    """The blocks and sub-pipeline calls around a node, outermost first, as scope keys."""
    if not spec.subs:
        return [g.id for g in spec.gate_chain(node.gate)]
    from interlock.core.model.subcalls import scope_chain

    return [ident if kind == "gate" else SUB + ident for kind, ident in scope_chain(spec, node)]
