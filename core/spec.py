"""PipelineSpec: the backend-neutral description of a pipeline, as frozen plain data.

Adapters only ever read this. It serializes to JSON and back without loss
(``PipelineSpec.to_json`` / ``PipelineSpec.from_json``), so a container can rebuild exactly
what was compiled, and tests can compare specs structurally.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .policies import Cache, Resources
from .retry import Retry
from .types import TypeSpec

if TYPE_CHECKING:  # il.map's spec loads with the first Node read (a task process reads none)
    from .fanout import MapSpec
    from .policies import CheckpointPolicy, Secret, Torchrun

SPEC_VERSION = 1


def _json_form(value: Any) -> Any:
    """Tuples as lists, recursively: the form JSON gives back, so a spec equals its round trip."""
    if isinstance(value, list | tuple):
        return [_json_form(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_form(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Port:
    name: str
    type: TypeSpec
    has_default: bool = False
    default: Any = None  # JSON-able

    def __post_init__(self) -> None:
        object.__setattr__(self, "default", _json_form(self.default))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type.to_json()}
        if self.has_default:
            out["default"] = self.default
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Port:
        return cls(d["name"], TypeSpec.from_json(d["type"]), "default" in d, d.get("default"))


@dataclass(frozen=True)
class StepSpec:
    """One step definition (a function plus its policies); nodes invoke it."""

    name: str
    ref: str  # "module:qualname" of the decorated function, importable in the image
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    fingerprint: str  # sha256 over the function source and the explicit cache version
    context_arg: str | None = None
    output_tuple: str | None = None  # "module:Qualname" of the NamedTuple, when several outputs
    resources: Resources = field(default_factory=Resources)
    retry: Retry = field(default_factory=Retry)
    cache: Cache | None = None
    checkpoint: CheckpointPolicy | None = None
    interruptible: bool = False
    timeout_s: float | None = None
    image: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    secrets: tuple[Secret, ...] = ()
    distributed: Torchrun | None = None
    doc: str = ""

    def input(self, name: str) -> Port | None:
        return next((p for p in self.inputs if p.name == name), None)

    def output(self, name: str) -> Port | None:
        return next((p for p in self.outputs if p.name == name), None)

    @property
    def nodes(self) -> int:
        """Pods the step runs on: ``il.Resources`` are per node (kfpytorch's replica, Trainer's
        ``resourcesPerNode``), so a distributed step requests them ``nnodes`` times."""
        return self.distributed.nnodes if self.distributed else 1

    @property
    def gpus(self) -> int:
        return self.resources.gpu * self.nodes

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ref": self.ref,
            "inputs": [p.to_json() for p in self.inputs],
            "outputs": [p.to_json() for p in self.outputs],
            "fingerprint": self.fingerprint,
            "context_arg": self.context_arg,
            "output_tuple": self.output_tuple,
            "resources": self.resources.to_json(),
            "retry": self.retry.to_dict(),
            "cache": self.cache.to_json() if self.cache else None,
            "checkpoint": self.checkpoint.to_json() if self.checkpoint else None,
            "interruptible": self.interruptible,
            "timeout_s": self.timeout_s,
            "image": self.image,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "env": dict(self.env),
            "secrets": [s.to_json() for s in self.secrets],
            "distributed": self.distributed.to_json() if self.distributed else None,
            "doc": self.doc,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StepSpec:
        checkpoint, secrets, distributed = None, (), None
        if d.get("checkpoint") or d.get("secrets") or d.get("distributed"):
            # Opt-in policies, their module loaded only by a step that has one (policies_opt_in).
            from .policies import CheckpointPolicy, Secret, Torchrun

            checkpoint = CheckpointPolicy.from_json(d["checkpoint"]) if d.get("checkpoint") else None
            secrets = tuple(Secret(**s) for s in d.get("secrets", ()))
            distributed = Torchrun.from_json(d["distributed"]) if d.get("distributed") else None
        return cls(
            name=d["name"],
            ref=d["ref"],
            inputs=tuple(Port.from_json(p) for p in d["inputs"]),
            outputs=tuple(Port.from_json(p) for p in d["outputs"]),
            fingerprint=d["fingerprint"],
            context_arg=d.get("context_arg"),
            output_tuple=d.get("output_tuple"),
            resources=Resources.from_json(d.get("resources", {})),
            retry=Retry.from_dict(d["retry"]),
            cache=Cache.from_json(d["cache"]) if d.get("cache") else None,
            checkpoint=checkpoint,
            interruptible=d.get("interruptible", False),
            timeout_s=d.get("timeout_s"),
            image=d.get("image"),
            labels=tuple(sorted(d.get("labels", {}).items())),
            annotations=tuple(sorted(d.get("annotations", {}).items())),
            env=tuple(sorted(d.get("env", {}).items())),
            secrets=secrets,
            distributed=distributed,
            doc=d.get("doc", ""),
        )


class BindingKind(StrEnum):
    """Where a binding's value comes from."""

    PARAM = "param"  # a pipeline parameter
    OUTPUT = "output"  # a node's output port, optionally a field path into a dataclass output
    CONST = "const"  # a JSON-able literal
    ONE_OF = "one_of"  # il.branch_value: the output of whichever branch of an elif/otherwise chain ran
    LIST = "list"  # a list written in the pipeline body whose items are bindings (fan-in)


@dataclass(frozen=True)
class Binding:
    """Where a node input (or a pipeline output, or a gate condition) gets its value."""

    kind: BindingKind
    param: str | None = None
    node: str | None = None
    port: str | None = None
    field: tuple[str, ...] = ()
    value: Any = None
    options: tuple[Binding, ...] = ()  # ONE_OF: one output per branch, in branch order
    items: tuple[Binding, ...] = ()  # LIST: one binding per element

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))
        object.__setattr__(self, "kind", BindingKind(self.kind))
        object.__setattr__(self, "field", tuple(self.field))
        object.__setattr__(self, "options", tuple(self.options))
        object.__setattr__(self, "value", _json_form(self.value))

    @staticmethod
    def of_param(name: str) -> Binding:
        return Binding(BindingKind.PARAM, param=name)

    @staticmethod
    def of_output(node: str, port: str, field: tuple[str, ...] = ()) -> Binding:
        return Binding(BindingKind.OUTPUT, node=node, port=port, field=tuple(field))

    @staticmethod
    def of_const(value: Any) -> Binding:
        return Binding(BindingKind.CONST, value=value)

    @staticmethod
    def one_of(options: tuple[Binding, ...]) -> Binding:
        return Binding(BindingKind.ONE_OF, options=tuple(options))

    @staticmethod
    def of_list(items: tuple[Binding, ...] | list[Binding]) -> Binding:
        return Binding(BindingKind.LIST, items=tuple(items))

    def nodes(self) -> set[str]:
        """The nodes whose outputs this binding reads (every branch of a ONE_OF, every item of a LIST)."""
        if self.kind is BindingKind.OUTPUT and self.node:
            return {self.node}
        return {n for b in (*self.options, *self.items) for n in b.nodes()}

    def describe(self) -> str:
        if self.kind is BindingKind.PARAM:
            return f"pipeline parameter {self.param!r}"
        if self.kind is BindingKind.OUTPUT:
            dotted = "".join(f".{f}" for f in self.field)
            return f"output {self.node}.{self.port}{dotted}"
        if self.kind is BindingKind.ONE_OF:
            return "branch value of " + " / ".join(
                f"({o.describe()})" if o.kind is BindingKind.ONE_OF else f"{o.node}.{o.port}" for o in self.options)
        if self.kind is BindingKind.LIST:
            return f"list [{', '.join(b.describe() for b in self.items)}]"
        return f"constant {self.value!r}"

    def to_json(self) -> dict[str, Any]:
        if self.kind is BindingKind.PARAM:
            return {"param": self.param}
        if self.kind is BindingKind.OUTPUT:
            out: dict[str, Any] = {"node": self.node, "port": self.port}
            if self.field:
                out["field"] = list(self.field)
            return out
        if self.kind is BindingKind.ONE_OF:
            return {"one_of": [o.to_json() for o in self.options]}
        if self.kind is BindingKind.LIST:
            return {"list": [b.to_json() for b in self.items]}
        return {"const": self.value}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Binding:
        if "one_of" in d:
            return cls.one_of(tuple(cls.from_json(o) for o in d["one_of"]))
        if "param" in d:
            return cls.of_param(d["param"])
        if "node" in d:
            return cls.of_output(d["node"], d["port"], tuple(d.get("field", ())))
        if "list" in d:
            return cls.of_list([cls.from_json(b) for b in d["list"]])
        return cls.of_const(d["const"])


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
            from .conditions import Cond  # conditions builds on this module

            expr = Cond.from_json(d["expr"])
        own = None
        if d.get("own") is not None:
            from .conditions import Cond

            own = Cond.from_json(d["own"])
        return cls(d["id"], Binding.from_json(d["condition"]), d.get("parent"), expr, d.get("follows"), own)


def _subs_from_json(items: Any) -> tuple[Any, ...]:
    if not items:
        return ()
    from .subpipeline import SubCall  # builds on this module

    return tuple(SubCall.from_json(s) for s in items)


def _reads(gate: Gate) -> list[Binding]:
    from .conditions import condition_of

    return condition_of(gate).bindings()


@dataclass(frozen=True)
class Node:
    """One invocation of a step in the pipeline graph."""

    name: str  # unique in the pipeline
    step: str  # key into PipelineSpec.steps
    inputs: tuple[tuple[str, Binding], ...]
    gate: str | None = None
    after: tuple[str, ...] = ()  # ordering-only dependencies
    map: MapSpec | None = None  # il.map: the step runs once per item (core/fanout.py)

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
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Node:
        from .fanout import MapSpec

        return cls(
            d["name"],
            d["step"],
            tuple((k, Binding.from_json(b)) for k, b in d["inputs"].items()),
            d.get("gate"),
            tuple(d.get("after", ())),
            MapSpec.from_json(d["map"]) if d.get("map") else None,
        )


@dataclass(frozen=True)
class FinallyBlock:
    """``with il.finally_(step): ...``: ``node`` runs after the block of ``members`` (node names,
    in pipeline order) whatever its outcome, with the block's status (core/finally_.py)."""

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
    schedule: str | None = None  # cron, for launch plans / recurring runs
    doc: str = ""
    version: int = SPEC_VERSION
    # il.finally_: runs after the body whatever its outcome (core/finally_.py); not in nodes.
    finally_: Node | None = None
    # Sub-pipeline calls (core/subpipeline.py SubCall): their nodes are in ``nodes`` under
    # qualified names ("prep.load"); a call is kept for adapters to render it natively.
    subs: tuple[Any, ...] = ()
    # il.finally_ around a block (``with il.finally_(step): ...``); their nodes are not in nodes either.
    finally_blocks: tuple[FinallyBlock, ...] = ()

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
            "schedule": self.schedule,
            **({"finally": self.finally_.to_json()} if self.finally_ else {}),
            **({"subs": [s.to_json() for s in self.subs]} if self.subs else {}),
            **({"finally_blocks": [b.to_json() for b in self.finally_blocks]} if self.finally_blocks else {}),
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
            schedule=d.get("schedule"),
            doc=d.get("doc", ""),
            finally_=Node.from_json(d["finally"]) if d.get("finally") else None,
            subs=_subs_from_json(d.get("subs", ())),
            finally_blocks=tuple(FinallyBlock.from_json(b) for b in d.get("finally_blocks", ())),
        )

    @classmethod
    def loads(cls, text: str) -> PipelineSpec:
        return cls.from_json(json.loads(text))
