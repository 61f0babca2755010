"""What one KFP task needs to run its node, compiled into the component (plain data, no pickle).

A task used to import the whole pipeline module and trace the pipeline again to find its
step (``load_spec``): every task of a run paid for the pipeline's imports (pandas, a
training library) and tracing, even a one-line gate or a retry that the shim refuses at
once. The compiled component now carries this node's slice of the spec::

    {'bindings':{'features':{...}},'declared':{'features':{...TypeSpec...}},'node':'train',
     'pipeline':'fraud-retrain','step':{...StepSpec, less its defaults and fingerprint...},'v':1}

(as Python literal text in the component's source: ``compact()``; ``dumps()`` is the same
as JSON text; ``loads`` reads both)

so the task runs exactly what was compiled, and imports only the step's own module, when it
calls the function (a refused retry never does). Its size is one step's, whatever the
pipeline's: the compiled YAML stays linear in the number of nodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlock.core.model.failure_policy import STOP
from interlock.core.model.spec import Binding, StepSpec
from interlock.core.model.types import TypeSpec

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec

VERSION = 1


@dataclass(frozen=True)
class NodeTask:
    pipeline: str  # the pipeline's name (run state, messages)
    node: str
    step: StepSpec
    bindings: dict[str, Binding]  # port -> what feeds it (for following a dataclass field)
    declared: dict[str, TypeSpec]  # port -> the type KFP sees (component.declared_inputs)
    map_item: str | None = None  # il.map: the port that receives one enumerated item
    map_tolerant: bool = False  # an item of a tolerant map: its task reports, never fails
    # failure_policy="stop" (core/model/failure_policy.py): on a cluster, KFP starts every task
    # that does not depend on a failure, so the task itself refuses to start after one.
    stop_after_failure: bool = False
    map_zipped: tuple[str, ...] = ()  # il.zip: the other mapped ports, their elements in the item
    # fields= (core/model/map_fields.py): each (field, port); the item is a record, each port its field
    map_fields: tuple[tuple[str, str], ...] = ()
    # il.map over the sub-pipeline holding the node (submap.py): the task takes the call's
    # enumerated item; each port fed by it -> its place among the item's values, or (fields=) the
    # name of the record's field it takes
    call_item: dict[str, int | str] | None = None

    @classmethod
    def of(cls, spec: PipelineSpec, node: str, declared: dict[str, TypeSpec] | None = None) -> NodeTask:
        """``declared``: component.declared_inputs(spec, node), where the caller has it already."""
        from .component import declared_inputs
        from .submap import item_ports

        n = spec.node(node)
        return cls(
            pipeline=spec.name, node=node, step=spec.step_of(n), bindings=n.bindings,
            declared=declared if declared is not None else declared_inputs(spec, node), map_item=n.map.item if n.map is not None else None,
            map_tolerant=bool(n.map is not None and n.map.tolerant), map_zipped=n.map.zipped if n.map is not None else (),
            map_fields=n.map.fields if n.map is not None else (),
            stop_after_failure=spec.failure_policy == STOP, call_item=item_ports(spec, node),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "pipeline": self.pipeline,
            "node": self.node,
            "step": lean_step(self.step),
            "bindings": {k: b.to_json() for k, b in sorted(self.bindings.items())},
            "declared": {k: t.to_json() for k, t in self.declared.items()},
            **({"map_item": self.map_item} if self.map_item is not None else {}),
            **({"map_tolerant": True} if self.map_tolerant else {}),
            **({"stop": True} if self.stop_after_failure else {}),
            **({"map_zipped": list(self.map_zipped)} if self.map_zipped else {}),
            **({"map_fields": [list(f) for f in self.map_fields]} if self.map_fields else {}),
            **({"call_item": dict(self.call_item)} if self.call_item is not None else {}),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def compact(self) -> str:
        """The text compiled into a component's source: ``to_dict()`` less the step's
        fingerprint (the component passes it to ``run_node`` on its own), as a Python literal
        (``python_literal``). ``loads`` reads it back."""
        d = self.to_dict()
        d["step"] = {k: v for k, v in d["step"].items() if k != "fingerprint"}
        return python_literal(d)

    @classmethod
    def loads(cls, text: str, fingerprint: str | None = None) -> NodeTask:
        """From ``dumps()`` (JSON) or ``compact()`` (a Python literal, which needs the step's
        ``fingerprint``)."""
        if text.startswith('{"'):
            return cls.from_dict(json.loads(text))
        import ast

        d = ast.literal_eval(text)
        if fingerprint is None:
            raise ValueError("a compact node task needs the step's fingerprint (the component's run_node argument)")
        return cls.from_dict({**d, "step": {**d["step"], "fingerprint": fingerprint}})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodeTask:
        if d.get("v") != VERSION:
            raise ValueError(f"node task format {d.get('v')!r}; this interlock reads {VERSION}: recompile the pipeline")
        return cls(
            pipeline=d["pipeline"], node=d["node"], step=StepSpec.from_json(d["step"]),
            bindings={k: Binding.from_json(b) for k, b in d["bindings"].items()},
            declared={k: TypeSpec.from_json(t) for k, t in d["declared"].items()},
            map_item=d.get("map_item"), map_tolerant=bool(d.get("map_tolerant", False)),
            stop_after_failure=bool(d.get("stop", False)),
            map_zipped=tuple(d.get("map_zipped", ())),
            map_fields=tuple((str(f), str(p)) for f, p in d.get("map_fields", ())),
            call_item=dict(d["call_item"]) if d.get("call_item") is not None else None,
        )


def python_literal(value: Any) -> str:
    """JSON-able data as a compact Python expression, for a component's source.

    Not JSON: kfp's YAML writes a component's source double-quoted, escaping each ``"`` of
    the JSON, so the same data written with Python's quotes is 15% shorter in the compiled
    YAML (which carries it once per component), and easier to read there. The source holds
    it as one string (``repr`` of this), not as a dict display: kfp tokenizes every
    component's source, and a display is hundreds of tokens.
    """
    out: list[str] = []
    _write_literal(value, out)
    return "".join(out)


_LEAVES = frozenset({str, int, bool, type(None)})  # exact types whose repr is their literal


def _write_literal(value: Any, out: list[str]) -> None:
    # One list for the whole text, joined once by the caller.
    if type(value) in _LEAVES:
        out.append(repr(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(sorted(value.items())):
            if i:
                out.append(",")
            _write_literal(k, out)
            out.append(":")
            _write_literal(v, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _write_literal(v, out)
        out.append("]")
    elif isinstance(value, float) and not value - value == 0:  # inf, nan (math.isfinite without math)
        out.append(f"float({str(value)!r})")  # inf, nan: no literal
    elif value is None or isinstance(value, str | int | float):  # bool is an int
        out.append(repr(value))
    else:
        raise TypeError(f"{type(value).__name__} in a node task: not JSON data")

# StepSpec.from_json reads these with d[...]; the rest it fills with the field's default.
_REQUIRED = ("name", "ref", "inputs", "outputs", "fingerprint", "retry")


def _lean(d: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if not (k in defaults and type(v) is type(defaults[k]) and v == defaults[k])}


def lean_step(step: StepSpec) -> dict[str, Any]:
    """``step.to_json()`` without the fields at their defaults, which ``StepSpec.from_json``
    (and ``Retry``/``Cache``) fill back: the payload sits in every component of the compiled
    YAML, so a pipeline of N steps carries it N times (it was two thirds default values)."""
    from interlock.core.model.policies import Cache
    from interlock.core.model.retry import Retry

    d = step.to_json()
    out = {k: v for k, v in d.items() if k in _REQUIRED or not (v is None or v is False or v in ({}, [], ""))}
    out["retry"] = _lean(d["retry"], Retry().to_dict())
    if d["cache"] is not None:  # "enabled" always stays: an empty mapping would read as no cache
        out["cache"] = {"enabled": d["cache"]["enabled"], **_lean(d["cache"], Cache().to_json())}
    return out
