"""Readable text for lineage: the tree ``interlock lineage MODEL_URI|RUN_ID`` prints."""

from __future__ import annotations

import json

from .client import LineageStore
from .model import ArtifactNode, ExecutionNode, LineageChain


def format_chain(chain: LineageChain) -> str:
    """A tree from each root artifact upstream: artifact <- execution <- its inputs ..."""
    lines: list[str] = []
    if chain.run is not None:
        r = chain.run
        lines.append(f"run {r.run_id}  pipeline {r.pipeline}  backend {r.backend}")
        lines.append(f"  git {_git(r.git_sha, r.git_dirty)}")
        if r.parameters:
            lines.append(f"  parameters {json.dumps(r.parameters, sort_keys=True)}")
        if r.steps:
            lines.append(f"  steps {', '.join(r.steps)}")
        if not chain.roots and not chain.root_executions:
            lines.append("  (no recorded steps)")
    else:
        lines.append(f"lineage of {chain.target}")
    seen: set[int] = set()
    for i, root in enumerate(chain.roots):
        last = i == len(chain.roots) - 1 and not chain.root_executions
        _artifact(root, "", last, lines, seen)
    for i, exe in enumerate(chain.root_executions):
        last = i == len(chain.root_executions) - 1
        lines.append(f"{'└─ ' if last else '├─ '}{_execution(exe)}  (no outputs)")
        seen.add(exe.id)
        for j, inp in enumerate(exe.inputs):
            _artifact(inp, "   " if last else "│  ", j == len(exe.inputs) - 1, lines, seen)
    if chain.truncated:
        lines.append("... (truncated at max_depth)")
    return "\n".join(lines)


def _artifact(art: ArtifactNode, prefix: str, last: bool, lines: list[str], seen: set[int]) -> None:
    branch, child = ("└─ ", "   ") if last else ("├─ ", "│  ")
    runs = f"  runs {', '.join(art.runs)}" if art.runs else ""
    lines.append(f"{prefix}{branch}{art.name or '?'}  {art.type}  {art.uri}{runs}")
    prefix += child
    exe = art.produced_by
    if exe is None:
        lines.append(f"{prefix}└─ (no producing execution recorded: an external input)")
        return
    if exe.id in seen:
        lines.append(f"{prefix}└─ <- {exe.step} (execution {exe.id}, shown above)")
        return
    seen.add(exe.id)
    lines.append(f"{prefix}└─ <- {_execution(exe)}")
    for i, inp in enumerate(exe.inputs):
        _artifact(inp, prefix + "   ", i == len(exe.inputs) - 1, lines, seen)


def _execution(exe: ExecutionNode) -> str:
    parts = [f"{exe.step} [{exe.state}]", f"run {exe.run_id}"]
    if exe.cached and exe.cached_from is not None:
        parts.append(f"cache hit of execution {exe.cached_from} (run {exe.cached_from_run})")
    image = exe.image or "?"
    if exe.image_digest:
        image += f"@{exe.image_digest}" if "@" not in image else ""
    parts.append(f"image {image}")
    parts.append(f"git {_git(exe.git_sha, exe.git_dirty)}")
    if exe.snapshots:
        parts.append(f"snapshots {', '.join(exe.snapshots)}")
    return "  ".join(parts)


def _git(sha: str | None, dirty: bool | None) -> str:
    if not sha:
        return "unknown"
    state = "" if dirty is None else (" (dirty)" if dirty else " (clean)")
    return f"{sha[:12]}{state}"


def lineage_command(
    target: str,
    sqlite: str | None = None,
    host: str | None = None,
    port: int | None = None,
    *,
    python: str | None = None,
) -> str:
    """What ``interlock lineage TARGET`` prints: the upstream tree of a model URI or run id.

    Local runs: ``sqlite=PATH``. A cluster: ``host=``/``port=`` of its metadata gRPC service.
    Raises InterlockErrors (MLMD_UNAVAILABLE, LINEAGE_NOT_FOUND, MLMD_CONNECTION...).
    """
    store = (
        LineageStore(sqlite_path=sqlite, python=python, create=False)
        if host is None
        else LineageStore(grpc_host=host, grpc_port=port, python=python)
    )
    with store:
        return format_chain(store.upstream(target))
