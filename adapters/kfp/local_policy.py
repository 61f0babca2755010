"""kfp-local under the pipeline's failure policy, the same steps as on every other backend.

kfp.local orders independent tasks by a depth-first walk of a protobuf map (an order that
changes from run to run) and, in a DAG without control flow, stops at the first failure, with
control flow goes on with everything independent. The run is driven so that neither matters:

- tasks start in the lowered plan's order (core/backend/plan.py), the one every local runner
  uses: ``plan_order`` stands in for kfp.local's ``topological_sort_tasks``;
- ``"stop"``: after a failure no task of a step not yet started starts (a map's items go on),
  and an ``il.finally_`` block's exit task runs only if the run reached the block;
- ``"continue"``: kfp.local's control-flow orchestrator runs every DAG (it skips what depends on
  a failure, as KFP does), and an exit task runs only if its block could start.

Nothing here changes the compiled IR: the cluster runs what a KFP user would write.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Callable, Iterator
from typing import Any

from interlock.core.backend.failure_scope import Downstream
from interlock.core.backend.plan import BLOCK, Plan, lower
from interlock.core.model.failure_policy import CONTINUE
from interlock.core.model.finally_blocks import block_call, is_call_finally
from interlock.core.model.pipeline_spec import PipelineSpec


class LocalPolicy:
    """What one kfp-local run may start, given the failures so far."""

    def __init__(self, spec: PipelineSpec, pipeline: Any, task_names: dict[str, str]):
        self.spec = spec
        self.plan: Plan = lower(spec)
        self.position = {n.name: i for i, n in enumerate(self.plan.nodes())}
        self.task_names = task_names
        self.components = dict(pipeline.pipeline_spec.components)
        self._dag_rank: dict[str, float] = {}
        self.failed: list[str] = []  # nodes whose task failed, in the order they failed

    # -- order ------------------------------------------------------------------------------
    def _rank(self, name: str, task: Any) -> float | None:
        node = self.task_names.get(name)
        if node is not None:
            return self.position.get(node)
        comp = task.component_ref.name
        if comp not in self._dag_rank:
            spec = self.components.get(comp)
            inner = spec.dag.tasks if spec is not None and spec.WhichOneof("implementation") == "dag" else {}
            ranks = [r for n, t in inner.items() if (r := self._rank(n, t)) is not None]
            self._dag_rank[comp] = min(ranks, default=float("inf"))
        found = self._dag_rank[comp]
        return None if found == float("inf") else found

    def plan_order(self, tasks: dict[str, Any]) -> list[str]:
        """kfp.local's ``topological_sort_tasks``: a stack (popped from the right) in plan order.

        A helper task (a gate's field selector, a map's collector) takes the rank of the first
        task that reads it, so it runs just before that task, as the plan's unit would."""
        ranks: dict[str, float | None] = {n: self._rank(n, t) for n, t in tasks.items()}
        readers: dict[str, list[str]] = {n: [] for n in tasks}
        for n, t in tasks.items():
            for up in t.dependent_tasks:
                if up in readers:
                    readers[up].append(n)
        for _ in range(len(tasks)):
            todo = [n for n, r in ranks.items() if r is None]
            if not todo:
                break
            for n in todo:
                known = [r for m in readers[n] if (r := ranks[m]) is not None]
                if known:
                    ranks[n] = min(known)
        waiting = {n: sum(up in tasks for up in t.dependent_tasks) for n, t in tasks.items()}
        inf = float("inf")
        ready = [((ranks[n] if ranks[n] is not None else inf), n) for n, w in waiting.items() if not w]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            _, n = heapq.heappop(ready)
            order.append(n)
            for m in readers[n]:
                waiting[m] -= 1
                if not waiting[m]:
                    r = ranks[m]
                    heapq.heappush(ready, (r if r is not None else inf, m))
        order += [n for n in tasks if n not in order]  # a cycle: kfp reports it
        return order[::-1]

    # -- what may start ---------------------------------------------------------------------
    def may_start(self, node: str) -> bool:
        """May a task of a step that has not started yet start now?"""
        if not self.failed:
            return True
        block = next((b for b in self.spec.finally_blocks if b.node.name == node), None)
        if self.spec.finally_ is not None and node == self.spec.finally_.name:
            return True  # the whole pipeline's finally step runs whatever happened
        if self.spec.failure_policy == CONTINUE:
            if block is None:
                return True  # kfp.local itself skips what depends on a failure
            call = block_call(self.spec, block)
            unit = self.plan.call(call.name) if is_call_finally(self.spec, block) else self.plan.scope(
                block.node.name + BLOCK)
            return self._down().unit_can_start(unit)
        if block is None:
            return False
        first = min((self.position[m] for m in block.members if m in self.position), default=0)
        return first <= min(self._at(n) for n in self.failed)  # the run reached the block

    def _at(self, node: str) -> int:
        """A node's place in plan order; a block's finally step (a nested block's failed) at its
        block's last node."""
        if node in self.position:
            return self.position[node]
        block = next((b for b in self.spec.finally_blocks if b.node.name == node), None)
        return max((self.position.get(m, 0) for m in block.members), default=0) if block is not None else 0

    def _down(self) -> Downstream:
        """What is down, replayed in plan order from the failures kfp saw."""
        down = Downstream(self.plan)
        failed = set(self.failed)
        for n in self.plan.nodes():
            if n.name in failed or not down.can_start(n.name):
                down.fail(n.name)
        return down


def loop_tasks(pipeline: Any) -> frozenset[str]:
    """The names of the pipeline's ParallelFor tasks (in the root DAG and in every component's)."""
    spec = pipeline.pipeline_spec
    dags = [spec.root.dag, *(c.dag for c in spec.components.values() if c.WhichOneof("implementation") == "dag")]
    return frozenset(name for dag in dags for name, task in dag.tasks.items() if task.WhichOneof("iterator"))


@contextlib.contextmanager
def driven(policy: LocalPolicy, loops: frozenset[str] = frozenset()) -> Iterator[None]:
    """kfp.local's task order and orchestrator as the policy needs them, for one run; and
    ``dsl.Collected`` of a ParallelFor (one of ``loops``) over an empty list read as ``[]``:
    kfp.local 2.17 records no outputs for a loop that ran no iteration, and its reader failed
    ("task 'for-loop-1' not found"), where KFP gives it an empty list."""
    from kfp.local import graph_utils, io
    from kfp.local.orchestrator import dag_orchestrator, enhanced_dag_orchestrator

    saved_sort: Callable[..., Any] = graph_utils.topological_sort_tasks
    saved_dag: Callable[..., Any] = dag_orchestrator.run_dag
    saved_get: Callable[..., Any] = io.IOStore.get_task_output

    def get_task_output(store: Any, task_name: str, key: str) -> Any:
        try:
            return saved_get(store, task_name, key)
        except ValueError:
            if task_name in loops and not store._task_output_data.get(task_name):
                return []
            raise

    graph_utils.topological_sort_tasks = policy.plan_order
    io.IOStore.get_task_output = get_task_output
    if policy.spec.failure_policy == CONTINUE:  # the plain DAG runner stops at the first failure
        dag_orchestrator.run_dag = enhanced_dag_orchestrator.run_enhanced_dag
    try:
        yield
    finally:
        graph_utils.topological_sort_tasks = saved_sort
        dag_orchestrator.run_dag = saved_dag
        io.IOStore.get_task_output = saved_get
