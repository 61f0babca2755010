"""What the run's record needs of values Argo keeps to itself: which ``il.when`` gates held
(Argo skips a task behind a closed gate without a pod, so nothing of it reaches the run
state) and how many items each map's list had (a map over an empty list runs no pod). The
steps whose outputs a condition or a map's list reads keep those outputs' text in the run
state (``--keep PORT``); the exit handler and the finally steps decide each gate and size each
map from them, as the local runner does in process, so a step behind a closed gate is
recorded as skipped and an empty map as succeeded, not as not-run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interlock.core.model.codecs import from_jsonable
from interlock.core.model.conditions import condition_of, decide
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import Binding, BindingKind

FOLDER = "argo-values"


def kept_ports(spec: PipelineSpec) -> dict[str, set[str]]:
    """node -> the output ports some gate's condition, some map's list or a finally step reads."""
    out: dict[str, set[str]] = {}
    read = [b for g in spec.gates for b in condition_of(g).bindings()]
    read += [n.bindings[n.map.item] for n in spec.nodes if n.map is not None]
    # A finally step reads its scope's outputs from here: an exit hook cannot resolve them.
    read += [b for n in spec.finally_nodes() for _, b in n.inputs if b.kind is BindingKind.OUTPUT]
    for b in read:
        if b.kind is BindingKind.OUTPUT and b.node and spec.node(b.node).map is None:
            out.setdefault(b.node, set()).add(b.port or "")
    return out


def keep(state_dir: Path, node: str, port: str, text: str) -> None:
    path = state_dir / FOLDER / node / port
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def decided(spec: PipelineSpec, state_dir: Path, params: dict[str, str]) -> dict[str, bool]:
    """Each gate whose condition's values are all there, by id."""
    value_of = _value_reader(spec, state_dir, params)
    return {g.id: held for g in spec.gates if (held := decide(g, value_of)) is not None}


def map_sizes(spec: PipelineSpec, state_dir: Path, params: dict[str, str]) -> dict[str, int]:
    """Each map node whose list's length is known, by name."""
    value_of = _value_reader(spec, state_dir, params)
    out: dict[str, int] = {}
    for n in spec.nodes:
        if n.map is None:
            continue
        try:
            found = value_of(n.bindings[n.map.item])
        except KeyError:
            continue
        if isinstance(found, list):
            out[n.name] = len(found)
    return out


def _value_reader(spec: PipelineSpec, state_dir: Path, params: dict[str, str]) -> Any:
    from .values import from_text, jsonable_from_text

    ptypes = {p.name: p for p in spec.params}

    def value_of(b: Binding) -> Any:
        if b.kind is BindingKind.CONST:
            return b.value
        if b.kind is BindingKind.PARAM:
            p = ptypes[b.param or ""]
            if b.param in params:
                return from_text(params[b.param or ""], p.type)
            if p.has_default:
                return from_jsonable(p.default, p.type)
            raise KeyError(b.param)
        if b.kind is not BindingKind.OUTPUT:
            raise KeyError(b.kind)
        path = state_dir / FOLDER / (b.node or "") / (b.port or "")
        if not path.exists():
            raise KeyError(b.node)
        t = next(p.type for p in spec.step_of(b.node or "").outputs if p.name == b.port)
        data = jsonable_from_text(path.read_text(), t)
        for name in b.field:
            data = data[name]
        return data if b.field else from_jsonable(data, t)

    return value_of


def sized(spec: PipelineSpec, state: Any, params: dict[str, str]) -> None:
    """Fold each map's items into its fragment with the list's length: an empty list is a map
    that ran, and succeeded (``aggregate``), though Argo ran no pod for it."""
    from interlock.core.model.fanout import item_node
    from interlock.core.run.map_items import aggregate

    for name, n in map_sizes(spec, state.state_dir, params).items():
        # A map in a block that did not run has a known list but no item: it was skipped, not run.
        if n == 0 or any(state.read_fragment(item_node(name, i)) is not None for i in range(n)):
            aggregate(spec, state, spec.node(name), items=n)
