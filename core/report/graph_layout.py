"""A small layered layout for a DAG of boxes, top to bottom (a Sugiyama sketch).

Layers by longest path from the sources; an edge that spans layers gets a dummy point per
layer it crosses, so it bends around boxes instead of through them; the order inside a layer
comes from barycentre sweeps (fewer crossings); x positions are pulled towards the
neighbours' mean with a minimum gap. Enough for pipelines of a few dozen steps, in
milliseconds, with no graphviz to install.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

H_GAP = 36.0  # between boxes of one layer
V_GAP = 64.0  # between layers
MARGIN = 20.0
DUMMY_W = 12.0


@dataclass
class Box:
    id: str
    w: float
    h: float
    x: float = 0.0  # centre
    y: float = 0.0  # top
    layer: int = 0
    dummy: bool = False


@dataclass
class Layout:
    boxes: dict[str, Box] = field(default_factory=dict)
    routes: list[tuple[str, str, list[tuple[float, float]]]] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def _topo(ids: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[str]:
    indeg = {i: 0 for i in ids}
    kids: dict[str, list[str]] = {i: [] for i in ids}
    for a, b in edges:
        indeg[b] += 1
        kids[a].append(b)
    ready = deque(i for i in ids if indeg[i] == 0)
    out: list[str] = []
    while ready:
        cur = ready.popleft()
        out.append(cur)
        for k in kids[cur]:
            indeg[k] -= 1
            if indeg[k] == 0:
                ready.append(k)
    if len(out) < len(ids):  # a cycle (not expected): keep its nodes, after the rest
        placed = set(out)  # a set: a membership test per node in the list was O(N^2)
        out += [i for i in ids if i not in placed]
    return out


def layout(sizes: dict[str, tuple[float, float]], edges: Sequence[tuple[str, str]]) -> Layout:
    """``sizes``: id -> (width, height), in insertion order; ``edges``: (src, dst) pairs."""
    ids = list(sizes)
    edges = [(a, b) for a, b in dict.fromkeys(edges) if a in sizes and b in sizes and a != b]
    order = _topo(ids, edges)
    rank = {n: i for i, n in enumerate(order)}
    edges = [(a, b) for a, b in edges if rank[a] < rank[b]]  # drop back edges of a cycle
    layer = {n: 0 for n in ids}
    outs: dict[str, list[str]] = {n: [] for n in ids}
    for a, b in edges:  # one pass over the edges, not one per node (O(N*E) at scale)
        outs[a].append(b)
    for n in order:
        for b in outs[n]:
            layer[b] = max(layer[b], layer[n] + 1)
    boxes = {n: Box(n, *sizes[n], layer=layer[n]) for n in ids}
    # Dummy points for long edges: chains of one-layer edges.
    chains: list[tuple[str, str, list[str]]] = []
    short: list[tuple[str, str]] = []
    for a, b in edges:
        path = [a]
        for lyr in range(layer[a] + 1, layer[b]):
            d = f"\0{a}\0{b}\0{lyr}"
            boxes[d] = Box(d, DUMMY_W, 0.0, layer=lyr, dummy=True)
            path.append(d)
        path.append(b)
        chains.append((a, b, path))
        short += list(zip(path, path[1:], strict=False))
    n_layers = max((bx.layer for bx in boxes.values()), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(n_layers)]
    for n, bx in boxes.items():
        layers[bx.layer].append(n)
    ups: dict[str, list[str]] = {n: [] for n in boxes}
    downs: dict[str, list[str]] = {n: [] for n in boxes}
    for a, b in short:
        ups[b].append(a)
        downs[a].append(b)
    _order_layers(layers, ups, downs)
    _place_x(layers, boxes, ups, downs)
    y = MARGIN
    for row in layers:
        height = max((boxes[n].h for n in row), default=0.0)
        for n in row:
            boxes[n].y = y + (height - boxes[n].h) / 2
        y += height + V_GAP
    out = Layout()
    out.boxes = {n: b for n, b in boxes.items() if not b.dummy}
    for a, b, path in chains:
        src, dst = boxes[a], boxes[b]
        points = [(src.x, src.y + src.h)]
        points += [(boxes[d].x, boxes[d].y) for d in path[1:-1]]
        points.append((dst.x, dst.y))
        out.routes.append((a, b, points))
    out.width = max((b.x + b.w / 2 for b in boxes.values()), default=0.0) + MARGIN
    out.height = max(y - V_GAP + MARGIN, 2 * MARGIN)
    return out


def _order_layers(layers: list[list[str]], ups: dict[str, list[str]], downs: dict[str, list[str]]) -> None:
    def sweep(rows: list[list[str]], nbrs: dict[str, list[str]]) -> None:
        for i in range(1, len(rows)):
            if len(rows[i]) < 2:  # nothing to order (a chain's every layer)
                continue
            pos = {n: k for k, n in enumerate(rows[i - 1])}
            here = {n: k for k, n in enumerate(rows[i])}
            keys = {}
            for n in rows[i]:
                ps = [pos[m] for m in nbrs[n] if m in pos]
                keys[n] = sum(ps) / len(ps) if ps else float(here[n])
            rows[i].sort(key=lambda n: (keys[n], here[n]))

    for _ in range(4):
        sweep(layers, ups)
        rev = layers[::-1]
        sweep(rev, downs)


def _place_x(layers: list[list[str]], boxes: dict[str, Box], ups: dict[str, list[str]],
             downs: dict[str, list[str]]) -> None:
    for row in layers:  # packed, left to right
        x = MARGIN
        for n in row:
            boxes[n].x = x + boxes[n].w / 2
            x += boxes[n].w + H_GAP
    for it in range(8):
        rows = layers if it % 2 == 0 else layers[::-1]
        nbrs = ups if it % 2 == 0 else downs
        for row in rows:
            if len(row) == 1:  # alone in its layer: where its neighbours pull it (what _fit gives)
                n = row[0]
                ps = [boxes[m].x for m in nbrs[n]]
                if ps:
                    boxes[n].x = sum(ps) / len(ps)
                continue
            want = []
            for n in row:
                ps = [boxes[m].x for m in nbrs[n]]
                want.append(sum(ps) / len(ps) if ps else boxes[n].x)
            _fit(row, want, boxes)
    left = min((b.x - b.w / 2 for b in boxes.values()), default=MARGIN)
    for b in boxes.values():
        b.x += MARGIN - left


def _fit(row: list[str], want: list[float], boxes: dict[str, Box]) -> None:
    """Centres as close to ``want`` as the order and the gaps allow (pushed right, then left)."""
    xs = list(want)
    for i in range(1, len(row)):
        gap = (boxes[row[i - 1]].w + boxes[row[i]].w) / 2 + H_GAP
        xs[i] = max(xs[i], xs[i - 1] + gap)
    # Centre the row's overshoot: the push only ever moved boxes right.
    shift = sum(x - w for x, w in zip(xs, want, strict=True)) / max(len(xs), 1)
    for i, n in enumerate(row):
        boxes[n].x = xs[i] - shift
