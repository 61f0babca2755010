"""Sub-pipeline calls read from a spec: ``SubCall``, the qualified node names (``prep.load``),
the scope a node or gate sits in, and each call's inputs and outputs (the authoring side is
``dsl/subpipeline.py``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.fanout import MapSpec
from interlock.core.model.names import check_step_name
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import Binding, BindingKind, Port

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import Node


SEP = "."  # between a sub-pipeline call's name and its nodes: "prep.load"


@dataclass(frozen=True)
class SubCall:
    """One call of a sub-pipeline in a pipeline body: a nested scope of the graph."""

    name: str  # the call's name; its nodes are "<name>.<node>" (nested calls: "a.b")
    pipeline: str  # the sub-pipeline's own name
    ref: str | None = None  # "module:attr" of the sub-pipeline, for the record
    parent: str | None = None  # the enclosing call, for a sub-pipeline nested in another
    gate: str | None = None  # the il.when block the call is written in (innermost)
    inputs: tuple[tuple[str, Binding], ...] = ()  # its parameters, as the caller bound them
    outputs: tuple[tuple[str, Binding], ...] = ()  # what its body returns, by output name
    nodes: tuple[str, ...] = ()  # every node recorded inside it, nested calls' included
    gates: tuple[str, ...] = ()  # every il.when block opened inside it
    finally_: str | None = None  # its body's il.finally_ step (a FinallyBlock over ``nodes``), if any
    after: tuple[str, ...] = ()  # ``after=``: nodes outside it that the whole call waits for (no data)
    # il.map over the sub-pipeline (core/model/submaps.py): how it fans out, and each mapped
    # parameter as the body reads it (one element; its ``inputs`` binding is the whole list)
    map: MapSpec | None = None
    items: tuple[Port, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "pipeline": self.pipeline, "ref": self.ref,
            # pairs, not objects: the order is the interface's (a spec is dumped with sorted keys)
            "inputs": [[k, b.to_json()] for k, b in self.inputs],
            "outputs": [[k, b.to_json()] for k, b in self.outputs],
            "nodes": list(self.nodes), "gates": list(self.gates),
        }
        if self.parent:
            out["parent"] = self.parent
        if self.gate:
            out["gate"] = self.gate
        if self.finally_:
            out["finally"] = self.finally_
        if self.after:
            out["after"] = list(self.after)
        if self.map is not None:
            out["map"] = self.map.to_json()
            out["items"] = [p.to_json() for p in self.items]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SubCall:
        return cls(
            d["name"], d["pipeline"], d.get("ref"), d.get("parent"), d.get("gate"),
            tuple((k, Binding.from_json(b)) for k, b in d.get("inputs", ())),
            tuple((k, Binding.from_json(b)) for k, b in d.get("outputs", ())),
            tuple(d.get("nodes", ())), tuple(d.get("gates", ())), d.get("finally"), tuple(d.get("after", ())),
            MapSpec.from_json(d["map"]) if d.get("map") else None, tuple(Port.from_json(p) for p in d.get("items", ())),
        )


def check_node_name(name: str, *, pipeline: str | None = None) -> str:
    """A node name: a plain name, or a qualified ``call.node`` whose every segment is one."""
    from interlock.core.model.names import MAX_NAME, RULE

    if isinstance(name, str) and SEP in name:
        for seg in name.split(SEP):
            check_step_name(seg, what="node", pipeline=pipeline)
        if len(name) > MAX_NAME:
            raise PipelineDefinitionError(
                f"invalid node name {name!r}: {len(name)} characters (at most {MAX_NAME})",
                pipeline=pipeline, step=name,
                hint=f"shorten the sub-pipeline call's name (pipeline.named('...')) or the step's; names are {RULE}",
            )
        return name
    return check_step_name(name, what="node", pipeline=pipeline)


# -- reading sub-pipeline calls from a spec -------------------------------------------------------
Scope = tuple[str, str]  # ("gate", id) or ("sub", call name)


def sub_of_node(spec: PipelineSpec, node: str) -> str | None:
    """The innermost sub-pipeline call holding ``node``."""
    best: str | None = None
    for s in spec.subs:
        if node in s.nodes and (best is None or len(s.name) > len(best)):
            best = s.name
    return best


def sub_of_gate(spec: PipelineSpec, gate: str) -> str | None:
    best: str | None = None
    for s in spec.subs:
        if gate in s.gates and (best is None or len(s.name) > len(best)):
            best = s.name
    return best


def call(spec: PipelineSpec, name: str) -> SubCall:
    return next(s for s in spec.subs if s.name == name)


def calls_after(spec: PipelineSpec) -> dict[str, frozenset[str]]:
    """For each node inside a call with ``after=``: the nodes it waits for through its calls."""
    found: dict[str, set[str]] = {}
    for c in spec.subs:
        if c.after:
            for n in c.nodes:
                found.setdefault(n, set()).update(c.after)
    return {k: frozenset(v) for k, v in found.items()}


def _inner_of(spec: PipelineSpec, gate: str | None, sub: str | None) -> Scope | None:
    """Of the innermost block and the innermost call around something, the one further in."""
    if gate is None:
        return ("sub", sub) if sub is not None else None
    if sub is None or gate in call(spec, sub).gates:
        return ("gate", gate)
    return ("sub", sub)


def enclosing(spec: PipelineSpec, scope: Scope) -> Scope | None:
    """The scope directly around a block or a call (None: the pipeline's top level)."""
    kind, ident = scope
    if kind == "gate":
        return _inner_of(spec, spec.gate(ident).parent, sub_of_gate(spec, ident))
    c = call(spec, ident)
    return _inner_of(spec, c.gate, c.parent)


def scope_of(spec: PipelineSpec, node: Node) -> Scope | None:
    """The innermost scope (block or call) holding ``node``."""
    return _inner_of(spec, node.gate, sub_of_node(spec, node.name))


def scope_chain(spec: PipelineSpec, node: Node | None = None, *, scope: Scope | None = None) -> list[Scope]:
    """The scopes (il.when blocks and sub-pipeline calls) around a node, or around and including
    ``scope``, outermost first."""
    cur = scope_of(spec, node) if node is not None else scope
    out: list[Scope] = []
    while cur is not None:
        out.append(cur)
        cur = enclosing(spec, cur)
    return out[::-1]


def validate_subs(spec: PipelineSpec) -> None:
    """Whole-spec checks of the sub-pipeline calls (a spec edited or read from JSON)."""
    names = {n.name for n in spec.nodes}
    calls = {s.name for s in spec.subs}
    gates = {g.id for g in spec.gates}
    for s in spec.subs:
        if s.parent is not None and s.parent not in calls:
            raise PipelineDefinitionError(f"sub-pipeline call {s.name!r} is nested in unknown call {s.parent!r}",
                                          pipeline=spec.name)
        missing = [n for n in s.nodes if n not in names]
        if missing:
            raise PipelineDefinitionError(f"sub-pipeline call {s.name!r} holds unknown node {missing[0]!r}",
                                          pipeline=spec.name)
        if s.gate is not None and s.gate not in gates:
            raise PipelineDefinitionError(f"sub-pipeline call {s.name!r} sits in unknown gate {s.gate!r}",
                                          pipeline=spec.name)
        if s.map is not None:  # il.map over it: the item list is bound, each mapped parameter declared
            declared = {p.name for p in s.items}
            if s.map.item not in dict(s.inputs) or not set(s.map.takes) <= declared:
                raise PipelineDefinitionError(
                    f"mapped sub-pipeline call {s.name!r}: its list {s.map.item!r} is not bound or a mapped "
                    f"parameter of {list(s.map.takes)} is not declared", pipeline=spec.name, step=s.name,
                )
            inside = set(s.nodes)
            blocks = [b.node.name for b in spec.finally_blocks if b.members and set(b.members) <= inside]
            if s.finally_ is not None or blocks:  # what il.map refuses while the pipeline is built
                raise PipelineDefinitionError(
                    f"mapped sub-pipeline call {s.name!r} holds an il.finally_ "
                    f"({s.finally_ or blocks[0]!r}): a finally inside a mapped body is not supported",
                    pipeline=spec.name, step=s.name, hint="put the il.finally_ around the il.map call",
                )
        for out_name, b in s.outputs:
            if b.kind is BindingKind.OUTPUT and b.node not in names:
                raise PipelineDefinitionError(
                    f"sub-pipeline call {s.name!r}: output {out_name!r} reads unknown node {b.node!r}",
                    pipeline=spec.name,
                )


# -- a call's interface, as a backend's nested construct sees it ----------------------------------
def _whole(b: Binding) -> Binding:
    return Binding.of_output(b.node or "", b.port or "") if b.kind is BindingKind.OUTPUT else b


def call_inputs(spec: PipelineSpec, name: str) -> list[tuple[str, Binding]]:
    """What a call's nodes and blocks read from outside it, named: the nested construct's inputs.

    A value the caller passed as one of the sub-pipeline's parameters keeps that parameter's
    name; anything else read from outside (a parameter of an enclosing pipeline reaching a
    nested call, a branch value) gets a name derived from where it comes from. Outputs are
    whole (a dataclass field is followed inside, where it is read).
    """
    from interlock.core.model.conditions import condition_of

    c = call(spec, name)
    inside = set(c.nodes)
    found: list[Binding] = []

    def consider(x: Binding) -> None:
        own_item = x.kind is BindingKind.PARAM and (x.param or "").startswith(name + "[].")  # a mapped call's item
        if (x.kind is BindingKind.PARAM and not own_item) or (x.kind is BindingKind.OUTPUT and x.node not in inside):
            w = _whole(x)
            if w not in found:
                found.append(w)
        elif x.kind is BindingKind.ONE_OF and not set(x.nodes()) <= inside:
            if set(x.nodes()) & inside:
                for o in x.options:
                    consider(o)
            elif x not in found:
                found.append(x)
        elif x.kind is BindingKind.LIST:
            for item in x.items:
                consider(item)

    for n in spec.nodes:
        if n.name in inside:
            for _, x in n.inputs:
                consider(x)
    for f in spec.finally_nodes():  # the finally steps written inside the call read its parameters too
        if f.name.startswith(name + SEP):
            for _, x in f.inputs:
                consider(x)
    for g in spec.gates:
        if g.id in c.gates:
            for x in condition_of(g).bindings():
                consider(x)
    return _named(found, [(k, _whole(b)) for k, b in c.inputs], "in")


def call_outputs(spec: PipelineSpec, name: str) -> list[tuple[str, Binding]]:
    """What the rest of the pipeline reads from inside a call, named: the nested construct's outputs."""
    from interlock.core.model.conditions import condition_of

    c = call(spec, name)
    inside = set(c.nodes)
    found: list[Binding] = []

    def consider(x: Binding) -> None:
        if x.kind is BindingKind.OUTPUT and x.node in inside:
            w = _whole(x)
            if w not in found:
                found.append(w)
        elif x.kind is BindingKind.ONE_OF and set(x.nodes()) <= inside:
            if x not in found:
                found.append(x)
        elif x.kind in (BindingKind.ONE_OF, BindingKind.LIST):
            for o in (*x.options, *x.items):
                consider(o)

    for n in spec.nodes:
        if n.name not in inside:
            for _, x in n.inputs:
                consider(x)
    for g in spec.gates:
        if g.id not in c.gates:
            for x in condition_of(g).bindings():
                consider(x)
    for _, x in spec.outputs:
        consider(x)
    return _named(found, [(k, _whole(b)) for k, b in c.outputs], "out")


def _named(found: list[Binding], declared: list[tuple[str, Binding]], prefix: str) -> list[tuple[str, Binding]]:
    taken: set[str] = set()
    out: list[tuple[str, Binding]] = []
    for b in found:
        own = [k for k, d in declared if d == b and k not in taken]
        if own:
            key = own[0]
        elif b.kind is BindingKind.PARAM:
            key = f"{prefix}_{b.param}"
        elif b.kind is BindingKind.OUTPUT:
            key = f"{prefix}_{b.node}_{b.port}"
        else:
            key = f"{prefix}_value_{len(out)}"
        key = re.sub(r"\W", "_", key)
        while key in taken:
            key += "_"
        taken.add(key)
        out.append((key, b))
    return out
