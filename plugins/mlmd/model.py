"""Plain dataclasses for lineage query results, built from the worker's JSON."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ExecutionNode:
    """One step execution (``system.ContainerExecution``) and the artifacts it consumed."""

    id: int
    step: str
    state: str  # COMPLETE, CACHED, FAILED, RUNNING, NEW, CANCELED
    run_id: str | None
    pipeline: str | None
    backend: str | None
    image: str | None
    image_digest: str | None
    git_sha: str | None
    git_dirty: bool | None
    snapshots: list[str]
    started: float | None
    ended: float | None
    cached_from: int | None  # id of the original execution a cache hit reused
    cached_from_run: str | None
    properties: dict[str, Any]
    inputs: list[ArtifactNode] = field(default_factory=list)
    input_ports: list[str] = field(default_factory=list)  # parallel to ``inputs``

    @property
    def cached(self) -> bool:
        return self.state == "CACHED"


@dataclass
class ArtifactNode:
    """One artifact (``system.Dataset``, ``system.Model``...) and the execution that made it."""

    id: int
    uri: str
    type: str
    name: str
    properties: dict[str, Any]
    runs: list[str]  # ids of every run the artifact is attributed to (producer and consumers)
    produced_by: ExecutionNode | None = None


@dataclass
class RunInfo:
    run_id: str
    pipeline: str | None
    backend: str | None
    git_sha: str | None
    git_dirty: bool | None
    parameters: dict[str, Any]
    created_ms: int = 0
    steps: list[str] = field(default_factory=list)


@dataclass
class RunSummary(RunInfo):
    cached_steps: int = 0


@dataclass
class LineageChain:
    """Upstream lineage of a model/artifact URI or of a whole run.

    ``roots`` are the starting artifacts: the queried artifact, or a run's final outputs
    (outputs that no step of the run consumed). Walk ``root.produced_by.inputs`` upstream.
    ``root_executions`` (run queries only) are the run's steps that output nothing, such as
    a failed step, walked upstream from their inputs in the same way.
    """

    target: str
    kind: str  # "artifact" | "run"
    roots: list[ArtifactNode]
    run: RunInfo | None = None
    truncated: bool = False
    root_executions: list[ExecutionNode] = field(default_factory=list)

    def artifacts(self) -> list[ArtifactNode]:
        """Every artifact reached, each once, from the roots upstream (depth first)."""
        return list(_unique(self._walk_artifacts()))

    def executions(self) -> list[ExecutionNode]:
        """Every execution reached, each once, from the roots upstream."""
        seen: dict[int, ExecutionNode] = {e.id: e for e in self.root_executions}
        for art in self.artifacts():
            if art.produced_by is not None:
                seen.setdefault(art.produced_by.id, art.produced_by)
        return list(seen.values())

    def artifact(self, uri: str) -> ArtifactNode:
        for art in self.artifacts():
            if art.uri == uri:
                return art
        raise KeyError(uri)

    def execution(self, step: str) -> ExecutionNode:
        for exe in self.executions():
            if exe.step == step:
                return exe
        raise KeyError(step)

    def snapshots(self) -> list[str]:
        """Data snapshot ids of every upstream execution, in walk order, without repeats."""
        out: list[str] = []
        for exe in self.executions():
            out.extend(s for s in exe.snapshots if s not in out)
        return out

    def _walk_artifacts(self) -> Iterator[ArtifactNode]:
        starts = list(self.roots) + [a for e in self.root_executions for a in e.inputs]
        stack = list(reversed(starts))
        seen: set[int] = set()
        while stack:
            art = stack.pop()
            if art.id in seen:
                continue
            seen.add(art.id)
            yield art
            if art.produced_by is not None:
                stack.extend(reversed(art.produced_by.inputs))


def _unique(items: Iterator[ArtifactNode]) -> Iterator[ArtifactNode]:
    seen: set[int] = set()
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            yield item


def chain_from_json(data: dict[str, Any]) -> LineageChain:
    """Link the worker's flat ``artifacts``/``executions`` maps into node objects."""
    executions: dict[int, ExecutionNode] = {}
    for key, e in data["executions"].items():
        p = e["properties"]
        snaps = p.get("snapshot_ids") or []
        executions[int(key)] = ExecutionNode(
            id=e["id"],
            step=e["step"],
            state=e["state"],
            run_id=p.get("run_id"),
            pipeline=p.get("pipeline_name"),
            backend=p.get("backend"),
            image=p.get("image"),
            image_digest=p.get("image_digest"),
            git_sha=p.get("git_sha"),
            git_dirty=p.get("git_dirty"),
            snapshots=[str(s) for s in snaps] if isinstance(snaps, list) else [str(snaps)],
            started=p.get("started_at"),
            ended=p.get("ended_at"),
            cached_from=p.get("cached_execution_id"),
            cached_from_run=p.get("cached_from_run"),
            properties=p,
        )
    artifacts: dict[int, ArtifactNode] = {}
    for key, a in data["artifacts"].items():
        producer = a.get("producer")
        artifacts[int(key)] = ArtifactNode(
            id=a["id"],
            uri=a["uri"],
            type=a["type"],
            name=a["name"],
            properties=a["properties"],
            runs=list(a["runs"]),
            produced_by=executions.get(producer) if producer is not None else None,
        )
    for key, e in data["executions"].items():
        node = executions[int(key)]
        for edge in e.get("inputs", []):
            art = artifacts.get(edge["artifact"])
            if art is not None:
                node.inputs.append(art)
                node.input_ports.append(edge["port"])
    run = None
    if data.get("run"):
        r = data["run"]
        run = RunInfo(
            run_id=r["run_id"],
            pipeline=r.get("pipeline"),
            backend=r.get("backend"),
            git_sha=r.get("git_sha"),
            git_dirty=r.get("git_dirty"),
            parameters=r.get("parameters") or {},
            created_ms=r.get("created_ms") or 0,
            steps=list(r.get("steps") or []),
        )
    return LineageChain(
        target=data["target"],
        kind=data["kind"],
        roots=[artifacts[a] for a in data["roots"] if a in artifacts],
        run=run,
        truncated=bool(data.get("truncated")),
        root_executions=[executions[e] for e in data.get("root_executions", []) if e in executions],
    )


def run_summary_from_json(r: dict[str, Any]) -> RunSummary:
    return RunSummary(
        run_id=r["run_id"],
        pipeline=r.get("pipeline"),
        backend=r.get("backend"),
        git_sha=r.get("git_sha"),
        git_dirty=r.get("git_dirty"),
        parameters=r.get("parameters") or {},
        created_ms=r.get("created_ms") or 0,
        steps=list(r.get("steps") or []),
        cached_steps=int(r.get("cached_steps") or 0),
    )
