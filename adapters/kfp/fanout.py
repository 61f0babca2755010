"""``il.map`` on KFP: ``dsl.ParallelFor`` over the list, results through ``dsl.Collected``.

KFP iterations do not know their index, and the shim names each item's run ``node[i]``
(cache key, checkpoint key, fragment). So a tiny ``enumerate-items`` task turns the list
into ``[{"index": i, "item": v}, ...]`` and the loop iterates that; the per-item component
takes the pair as a ``dict`` and ``run_node`` unpacks it. The loop's ``parallelism`` is the
map's ``concurrency``. Readers of the mapped node's outputs get ``dsl.Collected`` of them.
KFP has no "minimum successes" for a loop: ``tolerate`` is refused at compile time.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from interlock.core.errors import PipelineDefinitionError
from interlock.core.fanout import item_node
from interlock.core.spec import PipelineSpec
from interlock.core.types import TypeKind, TypeSpec

ITEM_TYPE = TypeSpec(TypeKind.DICT)  # what the per-item component declares for the item port
ENUMERATE = "enumerate-items"


# Source text, compiled without this module's `from __future__ import annotations` (kfp reads
# the annotations as types), like every generated component (component.py).
_ENUMERATE_SOURCE = (
    "def enumerate_items(items: list) -> list:\n"
    "    return [{'index': i, 'item': v} for i, v in enumerate(items)]\n"
)


def _enumerate_component(image: str) -> Any:
    from kfp import dsl

    from .component import _function_from_source

    fn = _function_from_source(_ENUMERATE_SOURCE, "enumerate_items", "<interlock-kfp enumerate-items>")
    return dsl.component(fn, base_image=image, install_kfp_package=False)


class Collected:
    """Stands for a mapped node's task after its loop: its outputs read as ``dsl.Collected``."""

    def __init__(self, task: Any):
        self.task = task
        self.name = task.name

    @property
    def outputs(self) -> dict[str, Any]:
        from kfp import dsl

        return {k: dsl.Collected(v) for k, v in self.task.outputs.items()}


def check(spec: PipelineSpec, node_name: str) -> None:
    m = spec.node(node_name).map
    if m is not None and m.tolerant:
        raise PipelineDefinitionError(
            f"il.map(tolerate={m.tolerate!r}): a KFP ParallelFor has no minimum-success policy, so failed "
            "items cannot be tolerated on KFP",
            pipeline=spec.name, step=node_name,
            hint="drop tolerate= for KFP, or catch the failure inside the step and return None",
        )


def open_loop(spec: PipelineSpec, node_name: str, items: Any, image: str) -> Any:
    """Enter ``ParallelFor`` over the enumerated list; returns (context manager, loop item)."""
    from kfp import dsl

    check(spec, node_name)
    m = spec.node(node_name).map
    assert m is not None
    enum = _enumerate_component(image)(items=items)
    enum.set_display_name(f"{node_name}-{ENUMERATE}")
    enum.set_caching_options(enable_caching=False)
    loop = dsl.ParallelFor(enum.output, parallelism=m.concurrency or 0, name=f"{node_name}-map")
    return loop, loop.__enter__(), enum


def collected_output(spec: PipelineSpec, returned: Any, name: str, b: Any, t: TypeSpec) -> Any:
    """A pipeline output that is a mapped node's list, from what kfp.local's pipeline returned."""
    from .types import to_value

    outputs = dict(getattr(returned, "outputs", None) or {})
    raw = outputs.get(name, outputs.get("Output")) if len(spec.outputs) == 1 else outputs.get(name)
    return to_value(raw, b, t)


@contextlib.contextmanager
def kfp_local_globals_kept() -> Iterator[None]:
    """Keep the process-wide state kfp.local changes per task as it was around a run: the root
    logger's level and handlers, and ``builtins.print``.

    kfp.local saves and restores them per task (``local_logger_context``, ``indented_print``);
    the iterations of a ParallelFor run on threads and interleave those saves, so the root
    logger could be left at INFO with kfp's handler, and ``print`` indented by four spaces,
    for the rest of the process.
    """
    import builtins

    root = logging.getLogger()
    level, handlers, print_ = root.level, root.handlers[:], builtins.print
    try:
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers
        builtins.print = print_


def stopped(state: Any, node: str) -> bool:
    """A stop marker (FATAL, a spent budget, a stop) ends the node's retries: its own, or (a
    mapped node) one of its items'.

    kfp.local reports an iteration under the loop's task name, not the item's: any stopped
    item fails the map anyway (fail fast; a tolerant map is refused on KFP), so any item's
    marker stops the retry.
    """
    if state.stop_marker(node) is not None:
        return True
    folder = state.marker_path(node).parent
    prefix = f"{node}["
    return folder.is_dir() and any(
        p.name.startswith(prefix) and state.stop_marker(p.name[: p.name.index("]") + 1]) is not None
        for p in folder.iterdir()
    )


def unpack_item(node: str, raw: Any) -> tuple[str, Any]:
    """The shim's node name for this iteration and its item (still in its JSON form)."""
    pair = raw if isinstance(raw, dict) else {}
    if "index" not in pair or "item" not in pair:
        raise ValueError(f"node {node!r}: expected an enumerated item {{'index': i, 'item': v}}, got {raw!r}")
    return item_node(node, int(pair["index"])), pair["item"]
