"""The pipeline's graph in its spec: ``PipelineSpec`` (nodes, gates, finally blocks), ``Node``,
``Gate`` and ``FinallyBlock``, as frozen plain data.

Beside ``spec.py`` (steps, ports, bindings), which is all a KFP task reads: it rebuilds its
own step from the node's compiled slice (``adapters/kfp/node_task.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from interlock.core.model.fanout import MapSpec
from interlock.core.model.spec import SPEC_VERSION, Binding, Port, StepSpec
from interlock.core.model.types import TypeSpec


@dataclass(frozen=True)
class Gate:
    """An ``il.when(...)`` block: nodes whose ``gate`` is this id run only if ``condition`` is true."""

    id: str
    condition: Binding  # a bool output; unused (a null constant) when ``expr`` is set
    parent: str | None = None  # the enclosing gate, for nested blocks
    # A condition expression (core.conditions.Cond) over outputs and parameters, e.g. `n > 5`.
    # Read conditions through core.conditions.condition_of(gate), which covers both forms.
    # For an il.elif_/il.otherwise block it is the effective condition (earlier ones false).
    expr: Any = None
    follows: str | None = None  # il.elif_/il.otherwise: the block of the chain just before it
    own: Any = None  # il.elif_: its own condition (None for il.otherwise), for native elif/else
    # Where the author wrote the block ("train.py:42"), for messages; not part of the spec's JSON.
    source: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = {"id": self.id, "condition": self.condition.to_json(), "parent": self.parent}
        if self.expr is not None:  # absent for a plain il.when(flag): older specs still load
            out["expr"] = self.expr.to_json()
        if self.follows is not None:
            out["follows"] = self.follows
            out["own"] = self.own.to_json() if self.own is not None else None
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Gate:
        expr = None
        if d.get("expr") is not None:
            from interlock.core.model.conditions import Cond  # conditions builds on this module

            expr = Cond.from_json(d["expr"])
        own = None
        if d.get("own") is not None:
            from interlock.core.model.conditions import Cond

            own = Cond.from_json(d["own"])
        return cls(d["id"], Binding.from_json(d["condition"]), d.get("parent"), expr, d.get("follows"), own)


def _triggers_from_json(d: dict[str, Any]) -> tuple[Any, ...]:
    from interlock.core.model.triggers import Cron, trigger_from_json

    if d.get("schedule"):  # specs compiled before triggers existed held one cron string
        return (Cron(d["schedule"]),)
    return tuple(trigger_from_json(t) for t in d.get("triggers", ()))


def _subs_from_json(items: Any) -> tuple[Any, ...]:
    if not items:
        return ()
    from interlock.core.model.subcalls import SubCall  # builds on this module

    return tuple(SubCall.from_json(s) for s in items)


def _reads(gate: Gate) -> list[Binding]:
    from interlock.core.model.conditions import condition_of

    return condition_of(gate).bindings()


@dataclass(frozen=True)
class Node:
    """One invocation of a step in the pipeline graph."""

    name: str  # unique in the pipeline
    step: str  # key into PipelineSpec.steps
    inputs: tuple[tuple[str, Binding], ...]
    gate: str | None = None
    after: tuple[str, ...] = ()  # ordering-only dependencies
    map: MapSpec | None = None  # il.map: the step runs once per item (core/model/fanout.py)
    # The join rule (core/model/joins.py RunIf value); None: the default, "none_failed".
    run_if: str | None = None

    def __post_init__(self) -> None:
        # Canonical order, so a spec compares equal after a JSON round trip.
        object.__setattr__(self, "inputs", tuple(sorted(self.inputs)))
        object.__setattr__(self, "after", tuple(sorted(set(self.after))))

    @property
    def bindings(self) -> dict[str, Binding]:
        return dict(self.inputs)

    def upstream(self) -> set[str]:
        ups = {n for _, b in self.inputs for n in b.nodes()}
        return ups | set(self.after)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "step": self.step,
            "inputs": {k: b.to_json() for k, b in self.inputs},
        }
        if self.gate:
            out["gate"] = self.gate
        if self.after:
            out["after"] = list(self.after)
        if self.map is not None:
            out["map"] = self.map.to_json()
        if self.run_if is not None:
            out["run_if"] = self.run_if
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Node:
        return cls(
            d["name"],
            d["step"],
            tuple((k, Binding.from_json(b)) for k, b in d["inputs"].items()),
            d.get("gate"),
            tuple(d.get("after", ())),
            MapSpec.from_json(d["map"]) if d.get("map") else None,
            d.get("run_if"),
        )


@dataclass(frozen=True)
class FinallyBlock:
    """``with il.finally_(step): ...``: ``node`` runs after the block of ``members`` (node names,
    in pipeline order) whatever its outcome, with the block's status (core/dsl/finally_.py)."""

    node: Node
    members: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node.to_json(), "members": list(self.members)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FinallyBlock:
        return cls(Node.from_json(d["node"]), tuple(d["members"]))


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    ref: str | None  # "module:attr" of the pipeline object, for containers to rebuild it
    params: tuple[Port, ...]
    steps: tuple[StepSpec, ...]
    nodes: tuple[Node, ...]  # in topological order
    gates: tuple[Gate, ...] = ()
    outputs: tuple[tuple[str, Binding], ...] = ()
    output_types: tuple[tuple[str, TypeSpec], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    triggers: tuple[Any, ...] = ()  # core.model.triggers: Cron, Every, OnData, OnDrift
    doc: str = ""
    version: int = SPEC_VERSION
    # il.finally_: runs after the body whatever its outcome (core/dsl/finally_.py); not in nodes.
    finally_: Node | None = None
    # Sub-pipeline calls (core/dsl/subpipeline.py SubCall): their nodes are in ``nodes`` under
    # qualified names ("prep.load"); a call is kept for adapters to render it natively.
    subs: tuple[Any, ...] = ()
    # il.finally_ around a block (``with il.finally_(step): ...``); their nodes are not in nodes either.
    finally_blocks: tuple[FinallyBlock, ...] = ()
    # After a step fails: "stop" starts nothing new; "continue" runs every step that does not
    # depend on a failed one (core/model/failure_policy.py).
    failure_policy: str = "stop"
    # il.on_failure: the finally steps (of ``finally_`` or a block) that run only when their scope failed.
    failure_handlers: tuple[str, ...] = ()
    # il.attempt() blocks and their fallbacks (core/model/attempts.py AttemptBlock); their nodes are in nodes.
    attempts: tuple[Any, ...] = ()

    def finally_nodes(self) -> tuple[Node, ...]:
        """Every il.finally_ step: the whole pipeline's, then each block's."""
        return (*((self.finally_,) if self.finally_ else ()), *(b.node for b in self.finally_blocks))

    # -- lookups ---------------------------------------------------------------------------
    # Indexed once per spec (it is frozen): adapters look steps and nodes up inside per-node
    # loops, and linear scans there made compiling N steps O(N^2). The first of duplicate
    # names wins, as validation reports duplicates by name.
    @cached_property
    def _steps_by_name(self) -> dict[str, StepSpec]:
        index: dict[str, StepSpec] = {}
        for s in self.steps:
            index.setdefault(s.name, s)
        return index

    @cached_property
    def _nodes_by_name(self) -> dict[str, Node]:
        index: dict[str, Node] = {}
        for n in (*self.nodes, *self.finally_nodes()):
            index.setdefault(n.name, n)
        return index

    @cached_property
    def _gates_by_id(self) -> dict[str, Gate]:
        index: dict[str, Gate] = {}
        for g in self.gates:
            index.setdefault(g.id, g)
        return index

    def step(self, name: str) -> StepSpec:
        return self._steps_by_name[name]

    def node(self, name: str) -> Node:
        return self._nodes_by_name[name]

    def step_of(self, node: str | Node) -> StepSpec:
        n = self.node(node) if isinstance(node, str) else node
        return self.step(n.step)

    def gate(self, gate_id: str) -> Gate:
        return self._gates_by_id[gate_id]

    def gate_chain(self, gate_id: str | None) -> list[Gate]:
        """The gates enclosing a block, outermost first."""
        chain: list[Gate] = []
        while gate_id:
            g = self.gate(gate_id)
            chain.append(g)
            gate_id = g.parent
        return chain[::-1]

    def param(self, name: str) -> Port | None:
        return next((p for p in self.params if p.name == name), None)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params if p.has_default}

    def downstream(self, node: str) -> set[str]:
        """All nodes that depend, directly or not, on ``node`` (data, ordering or gate)."""
        out: set[str] = set()
        frontier = [node]
        while frontier:
            cur = frontier.pop()
            for n in self.nodes:
                if n.name in out:
                    continue
                gate_nodes = {b.node for g in self.gate_chain(n.gate) for b in _reads(g)}
                if cur in n.upstream() or cur in gate_nodes:
                    out.add(n.name)
                    frontier.append(n.name)
        return out

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "name": self.name,
            "ref": self.ref,
            "doc": self.doc,
            "params": [p.to_json() for p in self.params],
            "steps": [s.to_json() for s in self.steps],
            "nodes": [n.to_json() for n in self.nodes],
            "gates": [g.to_json() for g in self.gates],
            "outputs": {k: b.to_json() for k, b in self.outputs},
            "output_types": {k: t.to_json() for k, t in self.output_types},
            "labels": dict(self.labels),
            **({"triggers": [t.to_json() for t in self.triggers]} if self.triggers else {}),
            **({"finally": self.finally_.to_json()} if self.finally_ else {}),
            **({"subs": [s.to_json() for s in self.subs]} if self.subs else {}),
            **({"finally_blocks": [b.to_json() for b in self.finally_blocks]} if self.finally_blocks else {}),
            **({"failure_policy": self.failure_policy} if self.failure_policy != "stop" else {}),
            **({"failure_handlers": list(self.failure_handlers)} if self.failure_handlers else {}),
            **({"attempts": [a.to_json() for a in self.attempts]} if self.attempts else {}),
        }

    def dumps(self, **kw: Any) -> str:
        return json.dumps(self.to_json(), sort_keys=True, **kw)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PipelineSpec:
        if d.get("version", SPEC_VERSION) != SPEC_VERSION:
            raise ValueError(f"PipelineSpec version {d.get('version')} is not supported (expected {SPEC_VERSION})")
        return cls(
            name=d["name"],
            ref=d.get("ref"),
            params=tuple(Port.from_json(p) for p in d["params"]),
            steps=tuple(StepSpec.from_json(s) for s in d["steps"]),
            nodes=tuple(Node.from_json(n) for n in d["nodes"]),
            gates=tuple(Gate.from_json(g) for g in d.get("gates", ())),
            outputs=tuple((k, Binding.from_json(b)) for k, b in d.get("outputs", {}).items()),
            output_types=tuple((k, TypeSpec.from_json(t)) for k, t in d.get("output_types", {}).items()),
            labels=tuple(sorted(d.get("labels", {}).items())),
            triggers=_triggers_from_json(d),
            doc=d.get("doc", ""),
            finally_=Node.from_json(d["finally"]) if d.get("finally") else None,
            subs=_subs_from_json(d.get("subs", ())),
            finally_blocks=tuple(FinallyBlock.from_json(b) for b in d.get("finally_blocks", ())),
            failure_policy=d.get("failure_policy", "stop"),
            failure_handlers=tuple(d.get("failure_handlers", ())),
            attempts=_attempts_from_json(d.get("attempts", ())),
        )

    @classmethod
    def loads(cls, text: str) -> PipelineSpec:
        return cls.from_json(json.loads(text))


def _attempts_from_json(data: Any) -> tuple[Any, ...]:
    from interlock.core.model.attempts import AttemptBlock

    return tuple(AttemptBlock.from_json(a) for a in data)
