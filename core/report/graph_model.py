"""A pipeline as a picture sees it: boxes (steps, maps, gates, the finally step) with their
policy badges, and edges (data, conditions, ordering). Pure data, no drawing: the SVG
writer (svg_graph.py) lays it out, the run report colours it by outcome.

Gates become diamond nodes, as a condition node in the Flyte console or KFP's condition
group: the nodes a condition reads point at the diamond, the diamond at the block it guards,
and an ``il.elif_``/``il.otherwise`` diamond hangs off the one before it by an "else" edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from interlock.core.base.durations import format_duration, parse_duration
from interlock.core.base.errors import PolicyError
from interlock.core.model.backoff import Backoff
from interlock.core.model.conditions import condition_of
from interlock.core.model.pipeline_spec import Gate, Node, PipelineSpec
from interlock.core.model.retry import Duration
from interlock.core.model.spec import Binding, StepSpec


class NodeKind(StrEnum):
    STEP = "step"
    MAP = "map"
    GATE = "gate"
    FINALLY = "finally"


class EdgeKind(StrEnum):
    DATA = "data"  # an output feeds an input
    CONDITION = "condition"  # a gate reads an output, or guards a block
    ORDER = "order"  # after=..., or the finally step after the body


@dataclass(frozen=True)
class Badge:
    text: str
    tone: str  # gpu | cache | spot | retry | checkpoint | timeout | distributed | map


@dataclass(frozen=True)
class DisplayNode:
    id: str
    title: str
    kind: NodeKind = NodeKind.STEP
    lines: tuple[str, ...] = ()  # under the title: the step when it differs, the map's list
    badges: tuple[Badge, ...] = ()
    tip: str = ""  # hover text: the docstring, resources


@dataclass(frozen=True)
class DisplayEdge:
    src: str
    dst: str
    kind: EdgeKind = EdgeKind.DATA
    label: str = ""


@dataclass
class DisplayGraph:
    name: str
    nodes: list[DisplayNode] = field(default_factory=list)
    edges: list[DisplayEdge] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # "epochs: int = 12"

    def node(self, node_id: str) -> DisplayNode | None:
        return next((n for n in self.nodes if n.id == node_id), None)


def gate_id(gate: str) -> str:
    return f"gate:{gate}"


def _seconds(value: Duration) -> str:
    try:
        return format_duration(parse_duration(value))
    except PolicyError:  # a label only: show what was written
        return str(value)


def retry_parts(step: StepSpec) -> list[str]:
    """One phrase per retry budget: "retry transient 2", "contention 3, backoff from 5m"..."""
    r = step.retry
    if r.any:
        return [f"retry {r.any}x any failure"]
    parts = []
    if r.transient:
        parts.append(f"retry transient {r.transient}")
    if isinstance(r.contention, Backoff) and r.contention.attempts:
        parts.append(f"contention {r.contention.attempts}, backoff from {_seconds(r.contention.first)}")
    if r.preempted:
        parts.append(f"preempted {r.preempted}")
    if r.timeout:
        parts.append(f"retry timeout {r.timeout}")
    if r.oom_remediation:
        parts.append("OOM: halve batch")
    return parts


def policy_badges(step: StepSpec) -> tuple[Badge, ...]:
    """The policies a reader looks for first, in a fixed order."""
    out: list[Badge] = []
    res = step.resources
    if res.gpu:
        out.append(Badge(f"GPU {res.gpu}x {res.accelerator or 'any'}", "gpu"))
    if step.distributed:
        d = step.distributed
        out.append(Badge(f"torchrun {d.nnodes}x{d.nproc_per_node}", "distributed"))
    if step.interruptible:
        out.append(Badge("spot", "spot"))
    if step.cache is not None and step.cache.enabled:
        out.append(Badge("cache enabled" + (f" v{step.cache.version}" if step.cache.version else ""), "cache"))
    out += [Badge(text, "retry") for text in retry_parts(step)]
    if step.checkpoint:
        out.append(Badge(f"checkpoint every {_seconds(step.checkpoint.every)}", "checkpoint"))
    if step.timeout_s:
        out.append(Badge(f"timeout {_seconds(step.timeout_s)}", "timeout"))
    return tuple(out)


def _resources_tip(step: StepSpec) -> str:
    res = step.resources
    bits = [f"{k}={v}" for k, v in (("cpu", res.cpu), ("memory", res.memory), ("queue", res.queue)) if v]
    return ", ".join(bits)


def _map_line(node: Node) -> str:
    assert node.map is not None
    whats = []
    for port in node.map.ports:
        over = node.bindings.get(port)
        whats.append(f"{port} over {_source(over) if over is not None else port}")
    extra = []
    if node.map.concurrency:
        extra.append(f"{node.map.concurrency} at once")
    if node.map.tolerate:
        extra.append(f"tolerate {node.map.tolerate:g}")
    return "map " + ", ".join(whats) + (" (zipped)" if node.map.zipped else "") + (f" ({', '.join(extra)})" if extra else "")


def _source(b: Binding) -> str:
    if b.param:
        return b.param
    if b.node:
        return f"{b.node}.{b.port}" + "".join(f".{f}" for f in b.field)
    return b.describe()


def _node(spec: PipelineSpec, node: Node, kind: NodeKind) -> DisplayNode:
    step = spec.step_of(node)
    lines: list[str] = []
    if step.name != node.name:
        lines.append(f"step {step.name}")
    badges = list(policy_badges(step))
    if node.map is not None:
        kind = NodeKind.MAP if kind is NodeKind.STEP else kind
        lines.append(_map_line(node))
    if kind is NodeKind.FINALLY:
        lines.append("finally: runs last, always")
    tip = "\n".join(t for t in (step.doc.strip(), _resources_tip(step)) if t)
    return DisplayNode(node.name, node.name, kind, tuple(lines), tuple(badges), tip)


def gate_title(g: Gate) -> str:
    if g.follows is None:
        return f"when {condition_of(g).describe()}"
    return f"elif {g.own.describe()}" if g.own is not None else "otherwise"


def _edge_labels(node: Node) -> dict[str, list[str]]:
    """Upstream node -> the inputs of ``node`` it feeds."""
    labels: dict[str, list[str]] = {}
    for port, b in node.inputs:
        for up in sorted(b.nodes()):
            labels.setdefault(up, []).append(port)
    return labels


def build(spec: PipelineSpec) -> DisplayGraph:
    g = DisplayGraph(spec.name)
    g.params = [
        f"{p.name}: {p.type.describe()}" + (f" = {p.default!r}" if p.has_default else "") for p in spec.params
    ]
    for node in spec.nodes:
        g.nodes.append(_node(spec, node, NodeKind.STEP))
    for gate in spec.gates:
        g.nodes.append(DisplayNode(gate_id(gate.id), gate_title(gate), NodeKind.GATE, tip=gate.id))
        for b in condition_of(gate).bindings():
            if b.node and gate.follows is None:  # an elif's reads hang off its chain
                g.edges.append(DisplayEdge(b.node, gate_id(gate.id), EdgeKind.CONDITION, b.port or ""))
            elif b.node and gate.own is not None and b.node not in _chain_reads(spec, gate):
                g.edges.append(DisplayEdge(b.node, gate_id(gate.id), EdgeKind.CONDITION, b.port or ""))
        if gate.follows:
            g.edges.append(DisplayEdge(gate_id(gate.follows), gate_id(gate.id), EdgeKind.CONDITION, "else"))
        elif gate.parent:
            g.edges.append(DisplayEdge(gate_id(gate.parent), gate_id(gate.id), EdgeKind.CONDITION, "then"))
    for node in spec.nodes:
        if node.gate:
            g.edges.append(DisplayEdge(gate_id(node.gate), node.name, EdgeKind.CONDITION, "then"))
        for up, ports in _edge_labels(node).items():
            g.edges.append(DisplayEdge(up, node.name, EdgeKind.DATA, ", ".join(ports)))
        for up in node.after:
            g.edges.append(DisplayEdge(up, node.name, EdgeKind.ORDER, "after"))
    if spec.finally_ is not None:
        g.nodes.append(_node(spec, spec.finally_, NodeKind.FINALLY))
        has_child = {e.src for e in g.edges}
        for n in g.nodes:
            if n.id not in has_child and n.kind is not NodeKind.FINALLY:
                g.edges.append(DisplayEdge(n.id, spec.finally_.name, EdgeKind.ORDER, ""))
    return g


def _chain_reads(spec: PipelineSpec, gate: Gate) -> set[str]:
    """Nodes already read by the earlier blocks of an elif chain (drawn there, once)."""
    out: set[str] = set()
    cur = gate.follows
    while cur:
        prev = spec.gate(cur)
        out |= {b.node for b in condition_of(prev).bindings() if b.node}
        cur = prev.follows
    return out
