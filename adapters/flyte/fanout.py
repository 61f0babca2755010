"""``il.map`` on Flyte: an array node (flytekit's ``ArrayNodeMapTask``) over the per-item task.

The per-item task is the node's ordinary task (its body is the shim); the array node maps
it over the item input and binds the broadcast inputs (``bound_inputs``), with the map's
``concurrency`` and, for a fractional ``tolerate``, ``min_success_ratio`` (Flyte then types
the output ``List[Optional[T]]`` and puts None at failed items, as interlock does). A count
of tolerated failures has no Flyte form (the array node takes a ratio): it is refused.

The item index names the shim's run of the item (``node[i]``): in a pod Flyte gives it
through the array job index; under flyte-local, flytekit runs the items in order in this
process, so a per-run counter gives the same index.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.fanout import MapSpec, item_node
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.run.env import RunEnv

_COUNTERS: dict[tuple[str, str], itertools.count[int]] = {}
_LOCK = threading.Lock()


def _in_pod() -> bool:
    from flytekit.core.context_manager import ExecutionState, FlyteContextManager

    state = FlyteContextManager.current_context().execution_state
    return bool(state and state.mode == ExecutionState.Mode.TASK_EXECUTION)


def item_name(node: str) -> str:
    """The shim's node name for the item this task instance runs."""
    if _in_pod():
        from flytekit.core.array_node_map_task import ArrayNodeMapTask

        return item_node(node, ArrayNodeMapTask._compute_array_job_index())
    key = (RunEnv.read().run_id or "", node)
    with _LOCK:
        counter = _COUNTERS.setdefault(key, itertools.count())
        return item_node(node, next(counter))


def reset_counters(run_id: str) -> None:
    with _LOCK:
        for key in [k for k in _COUNTERS if k[0] == run_id]:
            del _COUNTERS[key]


def _empty(returned: Any) -> bool:
    """Did the array node return an empty list (it ran over no items)?"""
    try:
        return len(returned.val.collection.literals) == 0
    except AttributeError:
        return False


def observe(spec: PipelineSpec, state: Any, seen: dict[str, Any], returned: dict[str, Any],
            sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Fold each mapped node's item fragments into its own and record what the backend saw.
    ``sizes``: each map's list length, where the run saw it (``ItemsMapTask``)."""
    from interlock.core.base.status import Status
    from interlock.core.record.outcomes import Seen
    from interlock.core.run.map_items import MapReport, reports

    maps = reports(spec, state, sizes)
    for node in spec.nodes:
        name = node.name
        frag = state.read_fragment(name) if name in maps else None
        if frag is not None:  # the items tell what happened, not the array node
            seen[name] = Seen(frag.status)
        elif node.map is not None and name in seen and _empty(returned.get(name)):
            seen[name] = Seen(Status.SUCCEEDED)  # it ran, over an empty list
            maps[name] = MapReport(name, 0)
        # else: flytekit's cache served the whole array node (no item ran): CACHED, as observed
    return maps


_ITEMS_CLASS: list[type] = []


def _items_class() -> type:
    """ArrayNodeMapTask that, under flyte-local, runs every item of the list before it fails.

    flytekit's local ``_raw_execute`` stops at the first failure that leaves too few successes,
    so flyte-local ran fewer items than local and kfp-local (whose items all run). Every item
    runs here, then the first failure is raised if more items failed than the map tolerates
    (interlock's rule, ``MapSpec.allowed_failures``); the list's length is told to the run, so
    the map report counts items that never started as well. On a cluster propeller runs it.
    """
    if not _ITEMS_CLASS:
        from flytekit.core.array_node_map_task import ArrayNodeMapTask

        from interlock.core.base.errors import StepStopped
        from interlock.core.model.submaps import item_name as submap_item

        from .submap import CALL_INDEX_ARG
        from .tasks import _local_run, _step_failed

        class ItemsMapTask(ArrayNodeMapTask):
            def local_execute(self, ctx: Any, **kwargs: Any) -> Any:
                if _local_run() is None or not self._min_success_ratio or not self.metadata.cache:
                    return super().local_execute(ctx, **kwargs)
                # A tolerant map: flytekit's local cache would keep the node whole, failed items
                # (None) included, and serve them on a rerun; its items are not cached one by one
                # under flyte-local, so the node runs (as a tolerant map's items do on kfp-local).
                saved = self.metadata
                self._metadata = dataclasses.replace(saved, cache=False)
                try:
                    return super().local_execute(ctx, **kwargs)
                finally:
                    self._metadata = saved

            def _raw_execute(self, **kwargs: Any) -> Any:
                local = _local_run()
                mapped = [k for k in self.python_function_task.interface.inputs
                          if isinstance(kwargs.get(k), list) and k not in self.bound_inputs]
                lengths = {k: len(kwargs[k]) for k in mapped}
                if len(set(lengths.values())) > 1:  # as propeller, which refuses the array node's inputs
                    raise ValueError(f"il.zip over lists of different lengths {lengths}")
                count = len(kwargs[mapped[0]]) if mapped else 0
                if local is not None:  # in a mapped sub-pipeline's body: the map of one item of the call
                    index = kwargs.get(CALL_INDEX_ARG)
                    level = self.interlock_node if index is None else submap_item(self.interlock_node, (index,))
                    local.sizes[level] = count
                if local is None:
                    return super()._raw_execute(**kwargs)
                outputs, failed = [], []
                for i in range(count):
                    one = {k: (v[i] if k in mapped else v) for k, v in kwargs.items() if k in self.interface.inputs}
                    try:
                        outputs.append(self._run_task.execute(**one))
                    except Exception as exc:  # noqa: BLE001 - raised once every item ran
                        if isinstance(_step_failed(exc), StepStopped):
                            raise  # told to stop: no further item starts
                        outputs.append(None)
                        failed.append(exc)
                if len(failed) > MapSpec("item", None, self.interlock_tolerate).allowed_failures(count):
                    raise failed[0]
                return outputs if self.interface.outputs else []

        _ITEMS_CLASS.append(ItemsMapTask)
    return _ITEMS_CLASS[0]


def map_task(spec: PipelineSpec, node_name: str, inner: Any) -> Any:
    """The array node task for a mapped node, around its per-item task."""
    from flytekit.core.array_node_map_task import ArrayNodeMapTask

    node = spec.node(node_name)
    m = node.map
    assert m is not None
    if m.tolerates_a_count:
        raise PipelineDefinitionError(
            f"il.map(tolerate={m.tolerate!r}): a count of failed items has no Flyte form (an array node "
            "takes min_success_ratio)",
            pipeline=spec.name, step=node_name, hint="give tolerate as a fraction, e.g. tolerate=0.1",
        )
    # The array node maps every input it does not bind (il.zip: several lists, zipped as Flyte does).
    bound = {p for p, _ in node.inputs if p not in m.ports}
    # Optional inputs left at their default are bound too: they are not lists to map over.
    bound |= {p.name for p in spec.step_of(node).inputs if p.name not in m.ports and p.name not in dict(node.inputs)}
    from interlock.core.model.submaps import outermost

    from .submap import CALL_INDEX_ARG

    if outermost(spec, node_name) is not None:  # in a mapped sub-pipeline's body: the call's item index
        bound.add(CALL_INDEX_ARG)
    # The interlock mixin: registered as "<pipeline>.<node>" (flytekit would name it after the
    # task function's module, the same for every pipeline), and flyte-local sees it run.
    from .tasks import blank_task, task_name

    task = blank_task(_items_class(), task_name(spec, node_name), node_name, spec.step_of(node).name, spec.ref)
    task.interlock_tolerate = m.tolerate
    ArrayNodeMapTask.__init__(task, inner, concurrency=m.concurrency, min_success_ratio=m.min_success_ratio(),
                              bound_inputs=bound)
    return task
