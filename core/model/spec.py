"""PipelineSpec: the backend-neutral description of a pipeline, as frozen plain data.

Adapters only ever read this. It serializes to JSON and back without loss
(``PipelineSpec.to_json`` / ``PipelineSpec.from_json``), so a container can rebuild exactly
what was compiled, and tests can compare specs structurally.

This module holds a step's part (StepSpec, Port, Binding); the graph's classes
(``PipelineSpec``, ``Node``, ``Gate``, ``FinallyBlock``) are in ``pipeline_spec.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from interlock.core.model.codecs import TypeKind
from interlock.core.model.policies import Cache, Resources
from interlock.core.model.policies_opt_in import CheckpointPolicy, Secret, Torchrun
from interlock.core.model.retry import Retry
from interlock.core.model.types import TypeSpec

SPEC_VERSION = 1



def _json_form(value: Any) -> Any:
    """Tuples as lists and Enum members as their values, recursively: the form JSON gives
    back, so a spec equals its round trip."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_json_form(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_form(v) for k, v in value.items()}
    return value


def widened(value: Any, t: TypeSpec) -> Any:
    """``value`` with each int that ``t`` declares a float as a float (``a: float = 1`` is 1.0),
    in lists, dicts and dataclass objects too: Flyte and KFP type a float literal strictly."""
    if value is None or isinstance(value, bool):
        return value
    if t.kind is TypeKind.FLOAT and isinstance(value, int):
        return float(value)
    if t.kind is TypeKind.LIST and t.args and isinstance(value, list | tuple):
        return [widened(v, t.args[0]) for v in value]
    if t.kind is TypeKind.DICT and len(t.args) == 2 and isinstance(value, dict):
        return {k: widened(v, t.args[1]) for k, v in value.items()}
    if t.kind is TypeKind.DATACLASS and t.fields and isinstance(value, dict):
        types = dict(t.fields)
        return {k: widened(v, types[k]) if k in types else v for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Port:
    name: str
    type: TypeSpec
    has_default: bool = False
    default: Any = None  # JSON-able

    def __post_init__(self) -> None:
        object.__setattr__(self, "default", widened(_json_form(self.default), self.type))

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
    may_skip: bool = False  # it may raise il.Skip (core/model/joins.py): declared for the backends

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
            **({"may_skip": True} if self.may_skip else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StepSpec:
        checkpoint, secrets, distributed = None, (), None
        if d.get("checkpoint") or d.get("secrets") or d.get("distributed"):
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
            may_skip=d.get("may_skip", False),
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
