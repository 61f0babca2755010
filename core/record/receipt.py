"""Reproducibility receipts: one versioned JSON document per run.

Which code (git SHA, dirty flag, per-step fingerprints and images), which data (snapshot
ids the steps declared), which parameters, what happened (attempts with failure kinds,
cache hits, durations) and what it cost (GPU-seconds, an estimate from a price table).
Steps write fragments through the runtime shim; the backend assembles them at the end.
Secret-looking parameters and credentials in URLs never reach a receipt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.base.errors import PolicyError
from interlock.core.base.status import Status
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.policies import parse_quantity
from interlock.core.record.efficiency import GpuTime, run_gpu_time, step_gpu_time
from interlock.core.record.run_outputs import gate_records, summarize
from interlock.core.run.devices import billed_gpus, group_device
from interlock.core.run.exporters import export_run
from interlock.core.run.records import Fragment
from interlock.core.run.redact import Redactor
from interlock.core.run.state import RunState

RECEIPT_VERSION = 1

# USD per hour; rough on-demand list prices, overridable per team (INTERLOCK_PRICES=file.json).
DEFAULT_PRICES: dict[str, float] = {
    "cpu_core_hour": 0.04,
    "memory_gib_hour": 0.005,
    "gpu_hour:default": 2.50,
    "gpu_hour:nvidia-tesla-t4": 0.35,
    "gpu_hour:nvidia-l4": 0.80,
    "gpu_hour:nvidia-a100-40gb": 3.00,
    "gpu_hour:nvidia-a100-80gb": 4.00,
    "gpu_hour:nvidia-h100": 6.00,
    "gpu_hour:nvidia-h200": 8.00,
    "interruptible_discount": 0.65,  # spot costs (1 - discount) of on-demand
}



@dataclass(frozen=True)
class PriceTable:
    prices: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_PRICES))

    @classmethod
    def load(cls, path: str | None = None) -> PriceTable:
        """The default prices, updated from ``path`` or $INTERLOCK_PRICES (a JSON object of
        name -> USD per hour). A bad table is a PolicyError: il.run checks it before any step
        runs, so a typo never costs a finished run its receipt."""
        from_env = not path
        path = path or os.environ.get("INTERLOCK_PRICES")
        prices = dict(DEFAULT_PRICES)
        if path:
            where = f"price table {path}" + (" (INTERLOCK_PRICES)" if from_env else "")
            hint = 'a JSON object of name -> USD per hour, e.g. {"gpu_hour:nvidia-h200": 7.5}'
            try:
                loaded = json.loads(Path(path).read_text())
            except OSError as exc:
                raise PolicyError(f"cannot read {where}: {exc.strerror or exc}", hint=hint) from exc
            except ValueError as exc:
                raise PolicyError(f"{where} is not valid JSON: {exc}", hint=hint) from exc
            if not isinstance(loaded, dict):
                raise PolicyError(f"{where} must be a JSON object, got {type(loaded).__name__}", hint=hint)
            bad = {k: v for k, v in loaded.items() if isinstance(v, bool) or not isinstance(v, int | float) or v < 0}
            if bad:
                raise PolicyError(f"{where}: prices must be non-negative numbers; got {bad}", hint=hint)
            prices.update({k: float(v) for k, v in loaded.items()})
        return cls(prices)

    def gpu_hour(self, accelerator: str | None) -> float:
        return self.prices.get(f"gpu_hour:{accelerator}", self.prices["gpu_hour:default"])

    def estimate(self, resources: dict[str, Any], seconds: float, *, gpus: int, interruptible: bool,
                 nodes: int = 1) -> float:
        """``resources`` are per node; ``gpus`` is the step's total (what its ranks saw)."""
        hours = seconds / 3600.0 * nodes
        cpu = parse_quantity(resources.get("cpu", "1"), "cpu")
        mem_gib = parse_quantity(resources.get("memory", "1Gi"), "memory") / 2**30
        cost = hours * (cpu * self.prices["cpu_core_hour"] + mem_gib * self.prices["memory_gib_hour"])
        cost += seconds / 3600.0 * gpus * self.gpu_hour(resources.get("accelerator"))
        if interruptible:
            cost *= 1.0 - self.prices.get("interruptible_discount", 0.0)
        return round(cost, 6)


def _ranks_device(state: RunState, node: str, world: int, own: dict[str, Any] | None) -> dict[str, Any] | None:
    """A distributed node bills what its ranks saw: each rank records its device in its own
    fragment under ranks/<rank> (rank 0 in the node's fragment on Flyte, where the node
    fragment is rank 0's; under ranks/0 on KFP and local, where it is the launcher's)."""
    ranks = [RunState(Path(state.state_dir) / "ranks" / str(r), state.run_id).read_fragment(node) for r in range(world)]
    found = [own, *(f.device for f in ranks if f is not None)]
    return group_device(found) or own


def code_files(spec: PipelineSpec) -> list[Path]:
    """The source files of a pipeline and its steps, as this process imported them."""
    files: list[Path] = []
    for ref in dict.fromkeys([spec.ref or "", *(s.ref for s in spec.steps)]):
        module = sys.modules.get(ref.partition(":")[0])
        source = getattr(module, "__file__", None)
        if not source:
            continue
        path = Path(source).resolve()
        if path not in files:
            files.append(path)
    return files


def _git(cwd: Path | str, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=str(cwd), capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()


def git_info(start: str | Path | None = None, files: list[Path] | tuple[Path, ...] = ()) -> dict[str, Any]:
    """The commit the pipeline code came from: the repository holding the pipeline's source
    file (``files[0]``, else ``start``, else the current directory), not wherever the command
    ran. Dirty when a tracked file changed, or when one of ``files`` (the pipeline's and its
    steps' sources) is untracked or modified. Containers have no .git: they pass
    INTERLOCK_GIT_SHA (and INTERLOCK_GIT_DIRTY=1).

    ``{"sha": None, "dirty": None}`` (unknown) when git is not installed, the code is not in a
    repository, or the repository has no commit yet."""
    return _from_env() or _ask_git(_code_dir(start, files), files)


def _code_dir(start: str | Path | None, files: list[Path] | tuple[Path, ...]) -> Path:
    return Path(start) if start else (files[0].parent if files else Path(os.getcwd()))


def _from_env() -> dict[str, Any] | None:
    if os.environ.get("INTERLOCK_GIT_SHA"):
        return {"sha": os.environ["INTERLOCK_GIT_SHA"], "dirty": os.environ.get("INTERLOCK_GIT_DIRTY") == "1"}
    return None


def _ask_git(cwd: Path, files: list[Path] | tuple[Path, ...]) -> dict[str, Any]:
    try:
        top = _work_tree(cwd)
        # One process for HEAD and the tracked changes, git's word at the time it looked.
        porcelain = _git(cwd, "status", "--porcelain=v2", "--branch", "--untracked-files=no").splitlines()
        head = next((line.split()[2] for line in porcelain if line.startswith("# branch.oid ")), None)
        if head is None or head == "(initial)":
            return {"sha": None, "dirty": None}  # no commit yet: nothing to point at
        dirty = any(not line.startswith("#") for line in porcelain)
        ours = [str(f) for f in files if f.is_relative_to(top)]
        if ours and not dirty:  # a source git does not track makes the code dirty too
            dirty = bool(_git(cwd, "status", "--porcelain", "--untracked-files=all", "--", *ours))
    except (OSError, subprocess.SubprocessError, ValueError):  # no git, or not a repository
        return {"sha": None, "dirty": None}
    return {"sha": head, "dirty": dirty}


# Where set, these move or bound git's search for the repository: ask git then.
_GIT_LOCATION_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM")


def _work_tree(cwd: Path) -> Path:
    """The top of the work tree holding ``cwd``: the nearest folder up with a ``.git`` (a
    folder, or a file in a linked worktree or a submodule), where git looks first. Found
    here, not by ``git rev-parse --show-toplevel``: a process less at every run's start,
    and on a machine where the steps are short, a git process running beside them slows
    them. Git's own answer where its environment moves the search, or nothing is found."""
    if not any(os.environ.get(v) for v in _GIT_LOCATION_ENV):
        here = cwd.resolve()
        for folder in (here, *here.parents):
            if os.path.lexists(os.path.join(folder, ".git")):
                return folder
    return Path(_git(cwd, "rev-parse", "--show-toplevel")).resolve()


class _GitLookup(threading.Thread):
    """``git_info``'s git processes in a thread: they run while the run's steps do."""

    def __init__(self, cwd: Path, files: tuple[Path, ...]):
        super().__init__(name="interlock-git-info", daemon=True)
        self.args = (cwd, files)
        self.result: dict[str, Any] | None = None

    def run(self) -> None:
        self.result = _ask_git(*self.args)


_LOOKUPS: dict[tuple[str, tuple[Path, ...]], _GitLookup | dict[str, Any]] = {}
_LOOKUPS_LOCK = threading.Lock()


def prefetch_git_info(spec: PipelineSpec, code_dir: str | Path | None = None) -> None:
    """Take the receipt's git facts now, as the run starts: ``assemble_receipt`` for the same
    code takes this answer. What the receipt records is then the code as the run started,
    which is the code that ran; the git processes run in a thread alongside the steps."""
    files = tuple(code_files(spec))
    key = (str(code_dir), files)
    lookup = _from_env() or _GitLookup(_code_dir(code_dir, files), files)
    with _LOOKUPS_LOCK:
        _LOOKUPS[key] = lookup  # a lookup nobody took (a run that failed early) is replaced
    if isinstance(lookup, _GitLookup):
        lookup.start()


def _git_for(code_dir: str | Path | None, files: list[Path]) -> dict[str, Any]:
    with _LOOKUPS_LOCK:
        lookup = _LOOKUPS.pop((str(code_dir), tuple(files)), None)
    if isinstance(lookup, dict):
        return lookup
    if lookup is not None:
        lookup.join()
        if lookup.result is not None:
            return lookup.result
    return git_info(code_dir, files)


def redact(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters for the record: secret-looking keys masked, credentials stripped from URLs.

    Nested values too: a dataclass parameter (a config object) becomes a JSON object, and a
    secret-looking field inside it is masked like a top-level one. The rules: core/run/redact.py.
    """
    return Redactor.for_values(params)(dict(params))


def image_record(image: str | None) -> dict[str, Any]:
    if not image:
        return {"image": None, "digest": None}
    digest = image.split("@", 1)[1] if "@sha256:" in image else None
    return {"image": image, "digest": digest}


def attempts_usage(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """A step's usage over its attempts: data wait and checkpoint seconds summed, the mean
    GPU utilization of the sampled ones (absent where none was sampled)."""
    used: dict[str, Any] = {"data_wait_s": 0.0, "checkpoint_s": 0.0, "checkpoints": 0}
    utils: list[float] = []
    for a in attempts:
        u = a.get("usage") or {}
        used["data_wait_s"] += float(u.get("data_wait_s", 0.0))
        used["checkpoint_s"] += float(u.get("checkpoint_s", 0.0))
        used["checkpoints"] += int(u.get("checkpoints", 0))
        if (u.get("gpu") or {}).get("source") == "nvml":
            utils.append(float(u["gpu"].get("utilization", 0.0)))
    used["data_wait_s"], used["checkpoint_s"] = round(used["data_wait_s"], 6), round(used["checkpoint_s"], 6)
    if utils:
        used["gpu_utilization"] = round(sum(utils) / len(utils), 4)
    return used


def _without_node(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in snapshot.items() if k != "node"}


def assemble_receipt(
    spec: PipelineSpec,
    *,
    run_id: str,
    backend: str,
    state_dir: Path,
    params: dict[str, Any],
    status: Status | str,
    statuses: Mapping[str, Status | str],
    started: float,
    images: dict[str, str | None] | None = None,
    extra: dict[str, Any] | None = None,
    prices: PriceTable | None = None,
    code_dir: str | Path | None = None,
    fragments: Mapping[str, Fragment] | None = None,
    outputs: Mapping[str, Any] | None = None,
    gates: Mapping[str, bool] | None = None,
) -> Path:
    """Merge the step fragments the shim wrote into state_dir/receipt.json and return its path.

    ``fragments``: those of ``spec.nodes`` as ``settle`` just read them (``RunOutcome.fragments``),
    so that they are not read again; the finally steps' are read here. ``outputs``: the
    pipeline's outputs (a run that failed has none); ``gates``: each decided gate by id."""
    prices = prices or PriceTable.load()
    state = RunState(Path(state_dir), run_id)
    nodes = (*spec.nodes, *spec.finally_nodes())  # il.finally_'s steps too
    if fragments is None:
        fragments = state.fragments(n.name for n in nodes)  # only this run's: a state dir may be shared
    else:
        fragments = {**fragments, **state.fragments(n.name for n in spec.finally_nodes())}
    # The one redactor, knowing this run's secret values: over what steps and users wrote
    # (parameters, facts, snapshots, failure messages that may quote a parameter), not over
    # interlock's own identity fields (names, refs, digests).
    redactor = Redactor.for_values(params)
    steps: list[dict[str, Any]] = []
    snapshots: list[dict[str, Any]] = []
    total_gpu_s = 0.0
    total_cost = 0.0
    gpu_times: list[GpuTime] = []
    total_usage = {"data_wait_s": 0.0, "checkpoint_s": 0.0}
    resources: dict[str, dict[str, Any]] = {}  # per step: many nodes may run one step
    for node in nodes:
        step = spec.step_of(node)
        if step.name not in resources:
            resources[step.name] = step.resources.to_json()
        frag = fragments.get(node.name)
        is_cached = statuses.get(node.name) == Status.CACHED
        attempts = [a.to_dict() for a in frag.attempts] if frag and not is_cached else []
        busy = sum(a.get("duration_s", 0.0) for a in attempts)
        device = frag.device if frag else None
        if step.distributed is not None and frag is not None and not is_cached:
            device = _ranks_device(state, node.name, step.distributed.world_size, device)
        gpus = billed_gpus(step.gpus, device)  # what ran: a CPU-only run bills no GPU
        gpu_s = busy * gpus
        cost = prices.estimate(resources[step.name], busy, gpus=gpus, interruptible=step.interruptible,
                               nodes=step.nodes)
        total_gpu_s += gpu_s
        total_cost += cost
        gpu_time = step_gpu_time(attempts, gpus)
        gpu_times.append(gpu_time)
        used = attempts_usage(attempts)
        for key in ("data_wait_s", "checkpoint_s"):
            total_usage[key] += used.get(key, 0.0)
        for snap in frag.snapshots if frag else []:
            # One entry per snapshot, credited to the first node that declared it.
            if _without_node(snap) not in [_without_node(s) for s in snapshots]:
                snapshots.append({**snap, "node": node.name} if "node" not in snap else snap)
        image = (images or {}).get(node.name) or step.image
        steps.append({
            "node": node.name,
            "step": step.name,
            "status": Status(statuses.get(node.name, frag.status if frag else Status.NOT_RUN)),
            "cached": is_cached,
            "fingerprint": step.fingerprint,
            **image_record(image),
            "attempts": redactor(attempts),
            "failure_kinds": [a["failure"]["kind"] for a in attempts if a.get("failure")],
            "duration_s": round(busy, 6),
            "resources": dict(resources[step.name]),
            "labels": dict(step.labels),  # cost allocation: team, cost center
            "interruptible": step.interruptible,
            "distributed": step.distributed.to_json() if step.distributed else None,
            "gpus": {"requested": step.gpus, "billed": gpus, "device": device},
            "gpu_seconds": round(gpu_s, 3),
            "estimated_cost_usd": cost,
            "usage": used,
            "gpu_efficiency": gpu_time.to_json(),
            "facts": redactor(frag.facts if frag else {}),
        })
    receipt = {
        "receipt_version": RECEIPT_VERSION,
        "pipeline": spec.name,
        "pipeline_ref": spec.ref,
        "run_id": run_id,
        "backend": backend,
        "status": Status(status),
        "started": started,
        "ended": time.time(),
        "git": _git_for(code_dir, code_files(spec)),
        "parameters": redactor(dict(params)),
        "snapshots": redactor(snapshots),
        "cache_hits": [s["node"] for s in steps if s["cached"]],
        "steps": steps,
        "totals": {"gpu_seconds": round(total_gpu_s, 3), "estimated_cost_usd": round(total_cost, 6),
                   **{k: round(v, 6) for k, v in total_usage.items()},
                   "gpu_efficiency": run_gpu_time(gpu_times).to_json()},
        "gates": gate_records(spec, gates or {}),
        "outputs": redactor({k: summarize(v) for k, v in (outputs or {}).items()}),
        **redactor(extra or {}),
    }
    cause = state.read_cause()  # il.run(triggered_by=...) wrote it before the backend ran
    if cause is not None:
        receipt["triggered_by"] = redactor(cause)
    path = state.write_receipt(receipt)
    export_run(receipt)
    return path
