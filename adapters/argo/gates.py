"""Which ``il.when`` gates held, for the run's record: Argo skips a task behind a closed gate
without a pod, so nothing of it reaches the run state. The steps whose outputs a condition
reads keep those outputs' text in the run state (``--keep PORT``); the exit handler and the
finally steps decide each gate from them, as the local runner does in process, so a step
behind a closed gate is recorded as skipped, not as not-run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interlock.core.model.codecs import from_jsonable
from interlock.core.model.conditions import condition_of, decide
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import Binding, BindingKind

FOLDER = "argo-values"


def kept_ports(spec: PipelineSpec) -> dict[str, set[str]]:
    """node -> the output ports some gate's condition reads."""
    out: dict[str, set[str]] = {}
    for g in spec.gates:
        for b in condition_of(g).bindings():
            if b.kind is BindingKind.OUTPUT and b.node:
                out.setdefault(b.node, set()).add(b.port or "")
    return out


def keep(state_dir: Path, node: str, port: str, text: str) -> None:
    path = state_dir / FOLDER / node / port
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def decided(spec: PipelineSpec, state_dir: Path, params: dict[str, str]) -> dict[str, bool]:
    """Each gate whose condition's values are all there, by id."""
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
        path = state_dir / FOLDER / (b.node or "") / (b.port or "")
        if not path.exists():
            raise KeyError(b.node)
        t = next(p.type for p in spec.step_of(b.node or "").outputs if p.name == b.port)
        data = jsonable_from_text(path.read_text(), t)
        for name in b.field:
            data = data[name]
        return data if b.field else from_jsonable(data, t)

    out: dict[str, bool] = {}
    for g in spec.gates:
        held = decide(g, value_of)
        if held is not None:
            out[g.id] = held
    return out
