"""The lowered plan: a PipelineSpec as nested scopes, each scope's units in dependency order.

Every backend renders this one plan: a unit is a step (an ``il.map`` node included), an
``il.when`` block, an elif chain (its blocks and the branch values it yields), a sub-pipeline
call (its own units, inputs and outputs) or an ``il.finally_`` block (its units and its
finally step). Each scope's units come in a deterministic topological order: a unit after
every unit of its scope it reads from (a block also after what its condition, and the
conditions of the blocks inside it, read); among the ready ones, the one whose first node
comes first in the spec. A block is one unit, so its nodes are contiguous: KFP opens one
``dsl.If`` per contiguous run of tasks and refuses edges between two runs of one block.

Scopes have keys: an ``il.when`` block its gate id, a call ``sub:<call>``, an ``il.finally_``
block ``<finally step>-block``; adapters name their nested constructs from them.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.chains import own_condition, spec_option_gate
from interlock.core.model.conditions import condition_of
from interlock.core.model.finally_blocks import block_call, is_call_finally
from interlock.core.model.pipeline_spec import FinallyBlock, Gate, Node, PipelineSpec
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.subcalls import (
    SubCall,
    call_inputs,
    call_outputs,
    calls_after,
    scope_chain,
)

SUB = "sub:"  # a call's scope key: "sub:<call>"
BLOCK = "-block"  # an il.finally_ block's scope key: "<finally step>-block"


@dataclass(frozen=True)
class Step:
    """One node: a step call, or an ``il.map`` node (``node.map`` says how it fans out)."""

    node: Node

    @property
    def key(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class Block:
    """An ``il.when``/``il.elif_``/``il.otherwise`` block: its units run if its gate holds."""

    gate: Gate
    units: tuple[Unit, ...]

    @property
    def key(self) -> str:
        return self.gate.id


@dataclass(frozen=True)
class Chain:
    """An elif chain: its blocks in order (a block may hold no unit) and the ``il.branch_value``
    bindings it yields, each with one option per block."""

    blocks: tuple[Block, ...]
    values: tuple[Binding, ...]

    @property
    def key(self) -> str:
        return self.blocks[0].key


@dataclass(frozen=True)
class Call:
    """A sub-pipeline call: its own units, what it reads from outside it (``inputs``) and what the
    rest of the pipeline reads from inside it (``outputs``), named (core/model/subcalls.py)."""

    call: SubCall
    units: tuple[Unit, ...]
    inputs: tuple[tuple[str, Binding], ...]
    outputs: tuple[tuple[str, Binding], ...]
    finally_: Node | None  # the sub-pipeline's whole-body il.finally_ step, if any

    @property
    def key(self) -> str:
        return SUB + self.call.name


@dataclass(frozen=True)
class FinallyScope:
    """``with il.finally_(step): ...``: the block's units, then ``block.node`` whatever their outcome."""

    block: FinallyBlock
    units: tuple[Unit, ...]

    @property
    def key(self) -> str:
        return self.block.node.name + BLOCK


Unit = Step | Block | Chain | Call | FinallyScope
Scope = Block | Call | FinallyScope


@dataclass(frozen=True)
class Plan:
    """The root scope's units, and lookups over the scopes (by key)."""

    spec: PipelineSpec
    units: tuple[Unit, ...]
    # Lookups by scope key: the scope; a block's chain (by any of its gate ids); the nodes
    # inside a scope, nested ones too; the gates inside it (a block: its own first).
    scopes: Mapping[str, Scope] = field(repr=False, compare=False)
    chains: Mapping[str, Chain] = field(repr=False, compare=False)
    members: Mapping[str, tuple[str, ...]] = field(repr=False, compare=False)
    nested: Mapping[str, tuple[str, ...]] = field(repr=False, compare=False)

    def nodes(self) -> list[Node]:
        """Every node, in plan order (each block contiguous)."""
        out: list[Node] = []
        _flatten(self.units, out)
        return out

    def scope(self, key: str) -> Scope:
        return self.scopes[key]

    def call(self, name: str) -> Call:
        scope = self.scopes[SUB + name]
        assert isinstance(scope, Call)
        return scope

    def chain_of(self, gate_id: str) -> Chain | None:
        """The elif chain a block belongs to (None: a lone il.when)."""
        return self.chains.get(gate_id)

    def nodes_in(self, key: str) -> tuple[str, ...]:
        """The nodes inside a scope, those of scopes nested in it included, in spec order."""
        return self.members.get(key, ())

    def gates_in(self, key: str) -> tuple[str, ...]:
        """The il.when blocks inside a scope, nested ones included (a block: itself first)."""
        return self.nested.get(key, ())

    def calls_inside_out(self) -> list[Call]:
        """Every call, the innermost first (a backend that defines a call's construct before its
        caller's), in spec order among calls of one depth."""
        depth = {c.name: len(scope_chain(self.spec, scope=("sub", c.name))) for c in self.spec.subs}
        return [self.call(c.name) for c in sorted(self.spec.subs, key=lambda c: -depth[c.name])]

    def describe(self) -> str:
        """The plan as indented text, one unit a line."""
        lines = [f"plan {self.spec.name}"]
        _describe(self.units, 1, lines)
        return "\n".join(lines)


def _flatten(units: tuple[Unit, ...], out: list[Node]) -> None:
    for u in units:
        if isinstance(u, Step):
            out.append(u.node)
        elif isinstance(u, Chain):
            for b in u.blocks:
                _flatten(b.units, out)
        else:
            _flatten(u.units, out)


def _describe(units: tuple[Unit, ...], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    for u in units:
        if isinstance(u, Step):
            m = u.node.map
            lines.append(f"{pad}step {u.node.name}" + (f" (map over {', '.join(m.ports)})" if m is not None else ""))
        elif isinstance(u, Block):
            lines.append(f"{pad}when {u.key}: {condition_of(u.gate).describe()}")
            _describe(u.units, depth + 1, lines)
        elif isinstance(u, Chain):
            values = ", ".join(v.describe() for v in u.values)
            lines.append(f"{pad}chain {u.key}" + (f" -> {values}" if values else ""))
            for i, b in enumerate(u.blocks):
                own = own_condition(b.gate)
                head = "when" if i == 0 else "otherwise" if own is None else "elif"
                lines.append(f"{pad}  {head} {b.key}" + (f": {own.describe()}" if own is not None else ""))
                _describe(b.units, depth + 2, lines)
        elif isinstance(u, Call):
            ins = ", ".join(k for k, _ in u.inputs)
            outs = ", ".join(k for k, _ in u.outputs)
            over = f", map over {', '.join(u.call.map.ports)}" if u.call.map is not None else ""
            lines.append(f"{pad}call {u.key} (pipeline {u.call.pipeline}{over}) in: {ins or '-'} out: {outs or '-'}"
                         + (f" finally {u.finally_.name}" if u.finally_ is not None else ""))
            _describe(u.units, depth + 1, lines)
        else:
            lines.append(f"{pad}finally {u.key} (step {u.block.node.name})")
            _describe(u.units, depth + 1, lines)


# -- lowering ----------------------------------------------------------------------------------
Key = tuple[str, str]  # ("gate", id), ("sub", call) or ("fin", finally step)


def _key(k: Key) -> str:
    kind, ident = k
    return ident if kind == "gate" else SUB + ident if kind == "sub" else ident + BLOCK


def lower(spec: PipelineSpec) -> Plan:
    """The plan of a (validated) spec; raises when blocks depend on each other in a cycle."""
    return _Lowering(spec).plan()


class _Lowering:
    def __init__(self, spec: PipelineSpec):
        self.spec = spec
        self.index = {n.name: i for i, n in enumerate(spec.nodes)}
        self.follower = {g.follows: g for g in spec.gates if g.follows is not None}
        # Outermost first: a block closes after the blocks nested in it (spec order is innermost first).
        blocks = [b for b in reversed(spec.finally_blocks) if not is_call_finally(spec, b)]
        # An il.finally_ block sits at the top of its scope (the pipeline's or a call's): it is the
        # first scope of its members below that call, below the blocks it is nested in.
        fin_of: dict[str, list[FinallyBlock]] = {}
        for b in blocks:
            for m in b.members:
                fin_of.setdefault(m, []).append(b)
        self.paths: dict[str, tuple[Key, ...]] = {}
        owner: dict[Key, list[FinallyBlock]] = {}  # a block or call inside il.finally_ blocks -> those blocks
        for n in spec.nodes:
            path = list(scope_chain(spec, n))
            for k in path:
                for b in fin_of.get(n.name, ()):
                    if path.index(k) >= self._below_call(path, b) and b not in owner.setdefault(k, []):
                        owner[k].append(b)
            self.paths[n.name] = tuple(self._with_blocks(path, fin_of.get(n.name, [])))
        self.gate_paths: dict[str, tuple[Key, ...]] = {}
        for g in spec.gates:
            path = list(scope_chain(spec, scope=("gate", g.id)))
            around = [b for b in blocks if any(b in owner.get(k, ()) for k in path)]
            self.gate_paths[g.id] = tuple(self._with_blocks(path, around))
        self.members: dict[str, list[str]] = {}
        for n in spec.nodes:
            for k in self.paths[n.name]:
                self.members.setdefault(_key(k), []).append(n.name)
        self.nested: dict[str, list[str]] = {}
        for g in spec.gates:
            for k in self.gate_paths[g.id]:
                self.nested.setdefault(_key(k), []).append(g.id)
        for gid, gates in self.nested.items():  # a block's own gate first
            if gid in gates:
                gates.insert(0, gates.pop(gates.index(gid)))
        self.values = self._branch_values()
        self.call_after = calls_after(spec)  # a call's after=: every node in it waits for those
        self.scopes: dict[str, Scope] = {}
        self.chains: dict[str, Chain] = {}

    def _block(self, step: str) -> FinallyBlock:
        return next(b for b in self.spec.finally_blocks if b.node.name == step)

    def _below_call(self, path: list[Key], block: FinallyBlock) -> int:
        c = block_call(self.spec, block)
        return 0 if c is None else path.index(("sub", c.name)) + 1

    def _with_blocks(self, path: list[Key], around: list[FinallyBlock]) -> list[Key]:
        """``path`` with the il.finally_ blocks ``around`` it (outermost first) inserted: each right
        below its call, after the blocks of that call it is nested in."""
        for b in around:
            at = self._below_call(path, b)
            while at < len(path) and path[at][0] == "fin":
                at += 1
            path.insert(at, ("fin", b.node.name))
        return path

    def _chain(self, head: str) -> list[Gate]:
        chain = [self.spec.gate(head)]
        while chain[-1].id in self.follower:
            chain.append(self.follower[chain[-1].id])
        return chain

    def _head(self, gate_id: str) -> str:
        g = self.spec.gate(gate_id)
        while g.follows is not None:
            g = self.spec.gate(g.follows)
        return g.id

    def _branch_values(self) -> dict[str, list[Binding]]:
        """Each chain head's il.branch_value bindings, in the order a breadth-first walk of the
        nodes' inputs and the pipeline's outputs meets them (a nested chain's value is an option)."""
        found: dict[str, list[Binding]] = {}
        todo = [b for n in self.spec.nodes for _, b in n.inputs] + [b for _, b in self.spec.outputs]
        todo += [i for b in list(todo) for i in b.items]
        at = 0
        while at < len(todo):
            b = todo[at]
            at += 1
            if b.kind is not BindingKind.ONE_OF:
                continue
            todo += list(b.options)
            head = spec_option_gate(self.spec, b.options[0])
            if head is not None:
                values = found.setdefault(head, [])
                if b not in values:
                    values.append(b)
        return found

    def _reads(self, key: str) -> set[str]:
        """The nodes the conditions of the blocks inside a scope read."""
        return {b.node for g in self.nested.get(key, ()) for b in condition_of(self.spec.gate(g)).bindings() if b.node}

    def plan(self) -> Plan:
        units = self._units(self.spec.nodes, 0)
        members = {k: tuple(v) for k, v in self.members.items()}
        nested = {k: tuple(v) for k, v in self.nested.items()}
        return Plan(self.spec, units, self.scopes, self.chains, members, nested)

    def _units(self, nodes: tuple[Node, ...] | list[Node], depth: int) -> tuple[Unit, ...]:
        """The units of one scope (``nodes``: all inside it, in spec order), in dependency order."""
        held: dict[Key, list[Node]] = {}  # unit -> its nodes; a node's own unit is ("node", name)
        unit_of: dict[str, Key] = {}
        for n in nodes:
            path = self.paths[n.name]
            u: Key = ("node", n.name) if len(path) == depth else path[depth]
            if u[0] == "gate":
                u = ("gate", self._head(u[1]))  # a chain is one unit, named by its first block
            held.setdefault(u, []).append(n)
            unit_of[n.name] = u
        deps: dict[Key, set[Key]] = {}
        for u, ns in held.items():
            ups: set[str] = set()
            for n in ns:
                ups |= n.upstream() | self.call_after.get(n.name, frozenset())
            if u[0] == "gate":  # a block waits for its condition and those of the blocks inside it
                for g in self._chain(u[1]):
                    ups |= self._reads(g.id)
            elif u[0] != "node":
                ups |= self._reads(_key(u))
            deps[u] = {unit_of[x] for x in ups if x in unit_of and unit_of[x] != u}
        rank = {u: self.index[ns[0].name] for u, ns in held.items()}  # its first node in spec order
        waiting = {u: len(d) for u, d in deps.items()}
        readers: dict[Key, list[Key]] = {u: [] for u in held}
        for u, d in deps.items():
            for up in d:
                readers[up].append(u)
        ready = [(rank[u], u) for u in held if not waiting[u]]
        heapq.heapify(ready)
        out: list[Unit] = []
        while ready:
            _, u = heapq.heappop(ready)
            out.append(self._unit(u, held[u], depth))
            for r in readers[u]:
                waiting[r] -= 1
                if not waiting[r]:
                    heapq.heappush(ready, (rank[r], r))
        if len(out) < len(held):
            stuck = sorted(u[1] for u, w in waiting.items() if w)
            raise PipelineDefinitionError(f"il.when blocks depend on each other in a cycle: {stuck}",
                                          pipeline=self.spec.name)
        return tuple(out)

    def _unit(self, u: Key, nodes: list[Node], depth: int) -> Unit:
        kind, ident = u
        if kind == "node":
            return Step(nodes[0])
        if kind == "gate":
            chain = self._chain(ident)
            blocks = tuple(Block(g, self._units([n for n in nodes if self.paths[n.name][depth] == ("gate", g.id)],
                                                depth + 1)) for g in chain)
            for b in blocks:
                self.scopes[b.key] = b
            if len(blocks) == 1:
                return blocks[0]
            found = Chain(blocks, tuple(self.values.get(ident, ())))
            for b in blocks:
                self.chains[b.key] = found
            return found
        units = self._units(nodes, depth + 1)
        scope: Scope
        if kind == "sub":
            c = next(s for s in self.spec.subs if s.name == ident)
            fin = self.spec.node(c.finally_) if c.finally_ else None
            scope = Call(c, units, tuple(call_inputs(self.spec, ident)), tuple(call_outputs(self.spec, ident)), fin)
        else:
            scope = FinallyScope(self._block(ident), units)
        self.scopes[scope.key] = scope
        return scope
