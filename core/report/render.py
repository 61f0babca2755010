"""Pictures of a pipeline: a text listing for terminals, Mermaid and Graphviz DOT for docs."""

from __future__ import annotations

from interlock.core.model.conditions import condition_of, gate_label
from interlock.core.model.pipeline_spec import PipelineSpec


def _label(spec: PipelineSpec, node: str) -> str:
    step = spec.step_of(node)
    bits = []
    if step.resources.gpu:
        bits.append(f"{step.resources.gpu}x{step.resources.accelerator or 'gpu'}")
    if step.distributed:
        bits.append(f"{step.distributed.nnodes}x{step.distributed.nproc_per_node} torchrun")
    if step.cache is not None and step.cache.enabled:  # a policy, not an outcome: "cached" read as a hit
        bits.append("cache enabled")
    if step.interruptible:
        bits.append("spot")
    return f"{node} [{', '.join(bits)}]" if bits else node


def text(spec: PipelineSpec) -> str:
    lines = [f"pipeline {spec.name}({', '.join(f'{p.name}: {p.type}' for p in spec.params)})"]
    for node in spec.nodes:
        step = spec.step_of(node)
        ins = ", ".join(f"{k}<-{b.describe()}" for k, b in node.inputs)
        outs = ", ".join(f"{p.name}: {p.type}" for p in step.outputs) or "-"
        gate = ""
        if node.gate:
            conds = " and ".join(gate_label(g) for g in spec.gate_chain(node.gate))
            gate = f"  when {conds}"
        lines.append(f"  {_label(spec, node.name)}({ins}) -> {outs}{gate}")
    for c in spec.subs:  # sub-pipeline calls: their nodes are listed above as <call>.<node>
        ins = ", ".join(f"{k}<-{b.describe()}" for k, b in c.inputs)
        outs = ", ".join(f"{k} = {b.describe()}" for k, b in c.outputs) or "-"
        over = f" mapped over {', '.join(c.map.ports)}, once per item" if c.map is not None else ""
        lines.append(f"  [{c.name}: sub-pipeline {c.pipeline}({ins}) -> {outs}{over}]")
    for name, b in spec.outputs:
        lines.append(f"  => {name} = {b.describe()}")
    return "\n".join(lines)


def mermaid(spec: PipelineSpec) -> str:
    lines = ["flowchart TD"]
    ids = {n.name: f"n{i}" for i, n in enumerate(spec.nodes)}
    placed: set[str] = set()
    for c in sorted(spec.subs, key=lambda c: c.name):  # a subgraph per sub-pipeline call, innermost last
        if c.parent is None:
            _subgraph(spec, c.name, ids, lines, placed, "  ")
    for n in spec.nodes:
        if n.name not in placed:
            lines.append(f'  {ids[n.name]}["{_label(spec, n.name)}"]')
    for n in spec.nodes:
        for up in sorted(n.upstream()):
            lines.append(f"  {ids[up]} --> {ids[n.name]}")
        for g in spec.gate_chain(n.gate):
            for b in condition_of(g).bindings():
                if b.node:
                    field = ".".join((b.port or "", *b.field))
                    lines.append(f"  {ids[b.node]} -. {field} .-> {ids[n.name]}")
    return "\n".join(lines)


def _subgraph(spec: PipelineSpec, call: str, ids: dict[str, str], lines: list[str], placed: set[str],
              indent: str) -> None:
    c = next(s for s in spec.subs if s.name == call)
    lines.append(f'{indent}subgraph {call.replace(".", "_")}["{call}: {c.pipeline}"]')
    for inner in spec.subs:
        if inner.parent == call:
            _subgraph(spec, inner.name, ids, lines, placed, indent + "  ")
    for n in spec.nodes:
        if n.name in c.nodes and n.name not in placed:
            placed.add(n.name)
            lines.append(f'{indent}  {ids[n.name]}["{_label(spec, n.name)}"]')
    lines.append(f"{indent}end")


def dot(spec: PipelineSpec) -> str:
    lines = [f'digraph "{spec.name}" {{', "  rankdir=TB;"]
    for n in spec.nodes:
        lines.append(f'  "{n.name}" [label="{_label(spec, n.name)}", shape=box];')
    for n in spec.nodes:
        for up in sorted(n.upstream()):
            lines.append(f'  "{up}" -> "{n.name}";')
        for g in spec.gate_chain(n.gate):
            for b in condition_of(g).bindings():
                if b.node:
                    lines.append(f'  "{b.node}" -> "{n.name}" [style=dashed, label="{b.port}"];')
    lines.append("}")
    return "\n".join(lines)
