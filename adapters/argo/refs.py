"""Where a value is, seen from one DAG template of the workflow.

A node's outputs are ``tasks.<task>.outputs...`` in the DAG that runs it. Seen from a DAG
nested inside that one, the value must come in as an input of each DAG on the way down;
seen from an enclosing DAG, each DAG on the way up exports it as an output. ``Dag.resolve``
adds those inputs, outputs and the arguments of the tasks that call the nested DAGs as it
goes, so the renderer only asks for a value where it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .names import Names, param


@dataclass(frozen=True)
class Ref:
    """``text``: the reference inside ``{{ }}`` (``=...`` for an expression); ``expr``: the same
    in Argo's expression language; ``deps``: tasks of the reading DAG it depends on."""

    text: str
    expr: str
    artifact: bool
    deps: frozenset[str] = frozenset()


def _kind(artifact: bool) -> str:
    return "artifacts" if artifact else "parameters"


def task_ref(task: str, port: str, artifact: bool) -> Ref:
    k = _kind(artifact)
    return Ref(f"tasks.{task}.outputs.{k}.{port}", f"tasks['{task}'].outputs.{k}['{port}']", artifact,
               frozenset({task}))


@dataclass(eq=False)
class Dag:
    name: str
    template: dict[str, Any]
    parent: Dag | None = None
    call: dict[str, Any] | None = None  # the task of the parent DAG that runs this one
    tasks: list[dict[str, Any]] = field(default_factory=list)
    rep: dict[str, str] = field(default_factory=dict)  # node -> the task standing for it here
    child: dict[str, Dag] = field(default_factory=dict)  # task -> the nested DAG it runs
    deps: dict[str, set[str]] = field(default_factory=dict)  # task -> tasks it depends on
    names: Names = field(default_factory=Names)
    _in: dict[Any, str] = field(default_factory=dict)
    _out: dict[Any, str] = field(default_factory=dict)
    _pnames: Names = field(default_factory=Names)

    def ancestors(self) -> list[Dag]:
        out, d = [], self.parent
        while d is not None:
            out.append(d)
            d = d.parent
        return out

    def _toward(self, owner: Dag) -> Dag | None:
        """The child of this DAG on the way down to ``owner`` (None: ``owner`` is not below)."""
        d: Dag | None = owner
        while d is not None and d.parent is not self:
            d = d.parent
        return d

    def resolve(self, owner: Dag, node: str, port: str, artifact: bool) -> Ref:
        """Output ``port`` of ``node`` (run by ``owner``), as this DAG reads it."""
        if owner is self:
            return task_ref(self.rep[node], port, artifact)
        down = self._toward(owner)
        if down is not None:
            task = down.call["name"] if down.call else ""
            return task_ref(task, down.export(owner, node, port, artifact), artifact)
        return self.take(("out", node, port, artifact), artifact,
                         lambda parent: parent.resolve(owner, node, port, artifact))

    def take(self, key: Any, artifact: bool, outer: Any) -> Ref:
        """An input of this DAG fed, in the parent, by ``outer(parent)``."""
        k = _kind(artifact)
        name = self._in.get(key)
        if name is None:
            assert self.parent is not None and self.call is not None, f"{key} is not in scope of {self.name}"
            name = self._in[key] = self._pnames.take(param("-".join(str(p) for p in key[1:-1])), 128)
            ref: Ref = outer(self.parent)
            self.template.setdefault("inputs", {}).setdefault(k, []).append({"name": name})
            args = self.call.setdefault("arguments", {}).setdefault(k, [])
            if artifact:
                args.append({"name": name, "fromExpression": ref.expr[1:-1]} if ref.text.startswith("=")
                            else {"name": name, "from": f"{{{{{ref.text}}}}}"})
            else:
                args.append({"name": name, "value": f"{{{{{ref.text}}}}}"})
            self.parent.deps.setdefault(self.call["name"], set()).update(ref.deps)
        return Ref(f"inputs.{k}.{name}", f"inputs.{k}['{name}']", artifact)

    def export(self, owner: Dag, node: str, port: str, artifact: bool) -> str:
        key = (node, port, artifact)
        name = self._out.get(key)
        if name is None:
            inner = self.resolve(owner, node, port, artifact)
            name = self._out[key] = param(f"{node}-{port}")
            outs = self.template.setdefault("outputs", {}).setdefault(_kind(artifact), [])
            outs.append({"name": name, "from": f"{{{{{inner.text}}}}}"} if artifact
                        else {"name": name, "valueFrom": {"parameter": f"{{{{{inner.text}}}}}"}})
        return name
