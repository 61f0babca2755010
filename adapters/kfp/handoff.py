"""How a KFP launcher task and the ranks of its job exchange a step's inputs and outputs.

The ranks run in other pods (or, on kfp-local, other processes) than the KFP task, so KFP's
artifact paths are not theirs. The launcher stages the call in a directory on the run's
shared state (the state volume on a cluster, the run directory locally)::

    <state_dir>/dist/<node>/call.json      pipeline ref, node, fingerprint, parameter values,
                                           staged input artifacts, output names
    <state_dir>/dist/<node>/in/<name>      a copy of each input artifact (file or directory)
    <state_dir>/dist/<node>/out/<name>     rank 0 writes each output artifact here
    <state_dir>/dist/<node>/result.json    rank 0's parameter outputs and artifact metadata

and copies rank 0's outputs back into KFP's output artifacts when the job has succeeded.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.run.files import write_json_atomic


@dataclass
class StagedArtifact:
    """Stands in for a KFP artifact in a rank: what read_artifact/write_artifact use."""

    path: str
    uri: str = ""
    name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def log_metric(self, metric: str, value: float) -> None:  # kfp's Metrics.log_metric
        self.metadata[metric] = value


def handoff_dir(state_dir: Path, node: str) -> Path:
    return Path(state_dir) / "dist" / node


def _copy(src: Path, dst: Path) -> None:
    if dst.is_dir():
        shutil.rmtree(dst)
    elif dst.exists():
        dst.unlink()
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst)
    elif src.exists():
        shutil.copy2(src, dst)


def _is_artifact(value: Any) -> bool:
    return hasattr(value, "path") and hasattr(value, "metadata") and not isinstance(value, str | bytes)


def stage_call(
    directory: Path, *, pipeline_ref: str, node: str, fingerprint: str, args: dict[str, Any], outputs: list[str],
) -> Path:
    """Write call.json and copy the input artifacts; ``outputs`` are the KFP output artifact names."""
    if directory.exists():
        shutil.rmtree(directory)  # a relaunch starts from a clean hand-off (never a previous attempt's outputs)
    (directory / "out").mkdir(parents=True)
    params: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    for name, value in args.items():
        if name in outputs:
            continue
        if _is_artifact(value):
            staged = directory / "in" / name
            _copy(Path(value.path), staged)
            inputs[name] = {"path": str(staged), "uri": getattr(value, "uri", "") or "",
                            "name": getattr(value, "name", "") or "", "metadata": dict(value.metadata or {})}
        else:
            params[name] = value
    call = {"pipeline_ref": pipeline_ref, "node": node, "fingerprint": fingerprint,
            "params": params, "inputs": inputs, "outputs": list(outputs)}
    write_json_atomic(directory / "call.json", call, indent=1)
    return directory / "call.json"


def read_call(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(directory) / "call.json").read_text())
    return data


def rank_args(directory: Path, call: dict[str, Any]) -> dict[str, Any]:
    """The KFP-style argument dict a rank passes to the shim: parameters and stand-in artifacts."""
    args: dict[str, Any] = dict(call["params"])
    for name, a in call["inputs"].items():
        args[name] = StagedArtifact(a["path"], a.get("uri", ""), a.get("name", ""), dict(a.get("metadata") or {}))
    for name in call["outputs"]:
        args[name] = StagedArtifact(str(Path(directory) / "out" / name), name=name)
    return args


def write_result(directory: Path, params: list[Any], args: dict[str, Any], outputs: list[str]) -> None:
    write_json_atomic(Path(directory) / "result.json", {
        "params": params, "metadata": {name: dict(args[name].metadata) for name in outputs},
    })


def collect_result(directory: Path, args: dict[str, Any], outputs: list[str]) -> list[Any] | None:
    """Copy rank 0's output artifacts into KFP's; the parameter outputs (None: rank 0 wrote nothing)."""
    path = Path(directory) / "result.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    for name in outputs:
        art = args[name]
        _copy(Path(directory) / "out" / name, Path(art.path))
        art.metadata.update(data["metadata"].get(name, {}))
    return list(data["params"])
