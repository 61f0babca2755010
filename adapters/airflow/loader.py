"""The small loader a generated DAG file calls at parse time: the compiled spec -> an Airflow DAG.

The scheduler parses DAG files every few seconds, so this imports Airflow and interlock's
plain-data model only (never the pipeline's module, flytekit, kfp, torch or pandas; the
tests check it in a fresh interpreter). Each unit of the lowered plan becomes its native
construct: a step a task, an ``il.map`` dynamic task mapping (``<node>.items`` ->
``<node>.expand(index=...)`` -> ``<node>.collect``), an ``il.when`` block a short-circuit
task before it, a sub-pipeline call a TaskGroup, an ``il.finally_`` step a task with trigger
rule ``all_done``. The task bodies (``worker.py``) are imported when a task runs.

``serial`` (airflow-local's default): every task also waits for the one before it in plan
order with trigger rule ``all_done``, so that ``dag.test()`` (which starts the ready tasks
of a round in no fixed order) runs them in the order the local backend does; each task then
decides from the run state whether its node starts (failure policy, gates).
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from interlock.core.backend.plan import Block, Call, Chain, FinallyScope, Plan, Step, Unit, lower
from interlock.core.model.pipeline_spec import Node, PipelineSpec

from .names import SPEC_SUFFIX, task_id
from .schedule import dag_kwargs

_SPECS: dict[str, tuple[float, PipelineSpec, dict[str, Any]]] = {}


def compiled(spec_file: str) -> tuple[PipelineSpec, dict[str, Any]]:
    """The spec and the compile options in a sidecar file, read once per change of the file."""
    mtime = os.stat(spec_file).st_mtime
    held = _SPECS.get(spec_file)
    if held is None or held[0] != mtime:
        doc = json.loads(Path(spec_file).read_text())
        held = (mtime, PipelineSpec.loads(json.dumps(doc["spec"])), doc.get("options", {}))
        _SPECS[spec_file] = held
    return held[1], held[2]


def load_dag(dag_file: str) -> Any:
    """The DAG for the spec compiled beside ``dag_file`` (``<name>.py`` + ``<name>.interlock.json``)."""
    spec_file = str(Path(dag_file).with_suffix(SPEC_SUFFIX))
    spec, options = compiled(spec_file)
    return build_dag(spec, options, spec_file)


def _schema(spec: PipelineSpec) -> dict[str, Any]:
    from airflow.sdk import Param

    kinds = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "list": "array",
             "dict": "object", "dataclass": "object"}
    params: dict[str, Any] = {}
    for p in spec.params:
        kind = kinds.get(str(p.type.kind), None)
        types: Any = [kind, "null"] if kind and p.type.optional else kind
        extra = {"type": types} if kind else {}
        params[p.name] = Param(p.default, **extra) if p.has_default else Param(**extra)
    return params


def build_dag(spec: PipelineSpec, options: dict[str, Any], spec_file: str) -> Any:
    from airflow.sdk import DAG

    serial = bool(options.get("serial", False))
    dag = DAG(
        dag_id=options.get("dag_id") or spec.name,
        **dag_kwargs(spec, scheduled=bool(options.get("schedule", True))),
        params=_schema(spec),
        tags=["interlock"],
        doc_md=f"interlock pipeline `{spec.name}` (compiled by `interlock compile --backend airflow`)",
        default_args={"retries": 0},
    )
    with dag:
        _Render(spec, lower(spec), options, spec_file, serial).all()
    return dag


class _Render:
    """One pass over the plan; ``last`` is the task before the next one in plan order."""

    def __init__(self, spec: PipelineSpec, plan: Plan, options: dict[str, Any], spec_file: str, serial: bool):
        self.spec, self.plan, self.options, self.spec_file, self.serial = spec, plan, options, spec_file, serial
        self.entry: dict[str, Any] = {}  # node -> the task that starts it (a map: its items task)
        self.exit: dict[str, Any] = {}  # node -> the task that ends it (a map: its collect task)
        self.last: Any = None
        self.gates: list[tuple[Any, list[str]]] = []  # gate task, the nodes of its block
        from .operators import Operators

        self.ops = Operators(spec, options, spec_file)

    def all(self) -> None:
        self.units(self.plan.units)
        for gate_task, members in self.gates:  # a block's tasks that read nothing inside it start after its gate
            inside = set(members)
            for name in members:
                if not (self._reads(self.spec.node(name)) & inside):
                    gate_task >> self.entry[name]
        finals = [b.node for b in self.spec.finally_blocks] + ([self.spec.finally_] if self.spec.finally_ else [])
        body = [self.exit[n.name] for n in self.plan.nodes()]
        for node in finals:  # after everything in serial order; else after its own block (below)
            t = self.ops.finally_task(node)
            block = next((b for b in self.spec.finally_blocks if b.node.name == node.name), None)
            upstream = [self.exit[m] for m in block.members if m in self.exit] if block is not None else body
            for u in upstream:
                u >> t
            self._follow(t)

    def units(self, units: tuple[Unit, ...]) -> None:
        for u in units:
            if isinstance(u, Step):
                self.step(u.node)
            elif isinstance(u, Block):
                self.block(u)
            elif isinstance(u, Chain):
                for b in u.blocks:
                    self.block(b)
            elif isinstance(u, Call):
                from airflow.sdk import TaskGroup

                with TaskGroup(group_id=task_id(f"{u.call.name}-call").replace(".", "_"), prefix_group_id=False,
                               tooltip=f"sub-pipeline {u.call.pipeline}"):
                    self.units(u.units)
            elif isinstance(u, FinallyScope):
                self.units(u.units)  # its finally step: after the body (all())

    def block(self, b: Block) -> None:
        gate = self.ops.gate_task(b.gate.id)
        for name in self._condition_nodes(b):
            self.exit[name] >> gate
        if self.last is not None:  # beside the serial order, never in it: a closed gate skips only its block
            self.last >> gate
        self.gates.append((gate, list(self.plan.nodes_in(b.key))))
        self.units(b.units)

    def step(self, node: Node) -> None:
        if node.map is None:
            t = self.ops.step_task(node)
            first = last = t
        else:
            first, last = self.ops.map_tasks(node)
        self.entry[node.name], self.exit[node.name] = first, last
        for name in sorted(self._reads(node)):
            if name in self.exit:
                self.exit[name] >> first
        self._follow(first, last)

    def _follow(self, first: Any, last: Any = None) -> None:
        if self.serial and self.last is not None:
            self.last >> first
        self.last = last if last is not None else first

    def _reads(self, node: Node) -> set[str]:
        """What the node waits for: the nodes it reads and those it runs ``after=``."""
        return node.upstream()

    def _condition_nodes(self, b: Block) -> set[str]:
        from interlock.core.model.conditions import condition_of

        names: set[str] = set()
        for g in self.spec.gate_chain(b.gate.id):
            for ref in condition_of(g).bindings():
                names |= ref.nodes()
        return {n for n in names if n in self.exit}


def retry_delay(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)
