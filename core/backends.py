"""The backend seam: one small Protocol, found through the ``interlock.backends`` entry points.

A backend compiles a PipelineSpec into native objects and/or runs it. Core validates
parameters and capabilities first, so every backend refuses the same mistakes the same way.
Adding a backend means one package and one entry point; no other backend changes.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .codecs import TypeKind, json_problem, value_matches
from .errors import BackendNotFound, CapabilityError, PipelineDefinitionError, RunFailed
from .runstate import RunEnv, StepOutcome, run_dir_under
from .spec import PipelineSpec
from .status import Status

ENTRY_POINT_GROUP = "interlock.backends"
DEFAULT_BACKEND = "local"

# Features a pipeline may use; each backend says "native", "emulated: <how>" or "unsupported".
FEATURES = (
    "gpu", "accelerator", "shared_memory", "node_selector", "tolerations", "interruptible", "timeout",
    "retry.transient", "retry.contention_backoff", "retry.preempted", "retry.fatal_stop", "cache",
    "checkpoint", "gates", "secrets", "labels", "distributed", "schedule", "run",
)


@dataclass(frozen=True)
class Capabilities:
    backend: str
    features: dict[str, str]
    lossy: tuple[str, ...] = ()  # mappings that lose information, and what the adapter does instead
    description: str = ""

    def supports(self, feature: str) -> bool:
        return not self.features.get(feature, "unsupported").startswith("unsupported")


@dataclass
class RunOptions:
    run_id: str
    workdir: Path
    cache: bool = True
    sleeper: Callable[[float], None] = time.sleep
    progress: Callable[[str, str, str], None] | None = None  # (node, event, detail)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return run_dir_under(self.workdir, self.run_id)

    @property
    def cache_dir(self) -> Path:
        return self.workdir / "cache"

    def emit(self, node: str, event: str, detail: str = "") -> None:
        if self.progress:
            self.progress(node, event, detail)


@dataclass
class RunResult:
    pipeline: str
    run_id: str
    backend: str
    status: Status  # SUCCEEDED | FAILED
    outputs: dict[str, Any]
    steps: dict[str, StepOutcome]
    receipt_path: Path | None
    error: RunFailed | None = None  # StepFailed when a step failed

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def succeeded(self) -> bool:
        return self.status is Status.SUCCEEDED

    def __getitem__(self, output: str) -> Any:
        return self.outputs[output]


@runtime_checkable
class Backend(Protocol):
    name: str

    def capabilities(self) -> Capabilities: ...

    def compile(self, spec: PipelineSpec, out: Path, **options: Any) -> list[Path]: ...

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult: ...


# -- discovery -------------------------------------------------------------------------------
_registered: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Register a backend in-process (tests, notebooks); entry points are the normal route."""
    _registered[name] = factory


def available_backends() -> dict[str, Any]:
    from importlib.metadata import entry_points  # not at import time: it costs ~40ms

    found: dict[str, Any] = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    found.update(_registered)
    return dict(sorted(found.items()))


def get_backend(name: str) -> Backend:
    found = available_backends()
    if name not in found:
        raise BackendNotFound(
            f"unknown backend {name!r}; installed: {', '.join(found) or 'none'}",
            hint="adapters ship as extras: pip install 'interlock[flyte]' or 'interlock[kfp]'",
        )
    target = found[name]
    try:
        factory = target.load() if hasattr(target, "load") else target
    except ImportError as exc:
        raise BackendNotFound(
            f"backend {name!r} is registered but cannot be imported: {exc}",
            hint="install its extra, e.g. pip install 'interlock[flyte]'",
        ) from exc
    backend = factory()
    if not isinstance(backend, Backend):
        raise BackendNotFound(f"backend {name!r} does not implement the Backend protocol")
    return backend


# -- checks every backend gets -----------------------------------------------------------------
def features_used(spec: PipelineSpec) -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}

    def mark(feature: str, where: str) -> None:
        used.setdefault(feature, []).append(where)

    for node in spec.nodes:
        s = spec.step_of(node)
        r = s.resources
        checks = {
            "gpu": r.gpu > 0, "accelerator": bool(r.accelerator), "shared_memory": bool(r.shared_memory),
            "node_selector": bool(r.node_selector), "tolerations": bool(r.tolerations),
            "interruptible": s.interruptible, "timeout": s.timeout_s is not None,
            "cache": bool(s.cache and s.cache.enabled), "checkpoint": s.checkpoint is not None,
            "secrets": bool(s.secrets), "labels": bool(s.labels or s.annotations),
            "distributed": s.distributed is not None,
        }
        for feature, on in checks.items():
            if on:
                mark(feature, node.name)
    if spec.gates:
        mark("gates", ", ".join(g.id for g in spec.gates))
    if spec.schedule:
        mark("schedule", spec.name)
    return used


def check_capabilities(spec: PipelineSpec, caps: Capabilities, *, action: str = "run") -> None:
    if action == "run" and not caps.supports("run"):
        raise CapabilityError(
            f"backend {caps.backend!r} compiles only; it cannot run pipelines here",
            pipeline=spec.name, hint=f"compile with --backend {caps.backend}, or run with a local backend",
        )
    for feature, where in features_used(spec).items():
        if not caps.supports(feature):
            raise CapabilityError(
                f"backend {caps.backend!r} cannot express {feature!r} (used by {', '.join(where)})",
                pipeline=spec.name, step=where[0], hint="`interlock backends` lists what each backend supports",
            )


def resolve_params(spec: PipelineSpec, params: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - {p.name for p in spec.params})
    if unknown:
        raise PipelineDefinitionError(
            f"unknown parameter(s) {unknown}; parameters are {[p.name for p in spec.params]}",
            pipeline=spec.name, port=unknown[0],
        )
    resolved: dict[str, Any] = {}
    for p in spec.params:
        if p.name in params:
            value = params[p.name]
        elif p.has_default:
            value = p.default
        else:
            raise PipelineDefinitionError(
                f"missing required parameter of type {p.type.describe()}", pipeline=spec.name, port=p.name
            )
        if p.type.kind is TypeKind.DATACLASS and isinstance(value, dict):
            # A JSON object for a dataclass (the CLI's -p cfg='{...}'): check it field by field
            # here, or a bad field surfaces as a raw TypeError/ValueError inside a backend.
            problem = json_problem(value, p.type, p.name)
            if problem:
                raise PipelineDefinitionError(f"parameter value {problem}", pipeline=spec.name, port=p.name)
            resolved[p.name] = value
            continue
        if not value_matches(value, p.type):
            raise PipelineDefinitionError(
                f"parameter value {value!r} ({type(value).__name__}) does not fit {p.type.describe()}",
                pipeline=spec.name, port=p.name,
            )
        resolved[p.name] = value
    return resolved


def new_run_id(pipeline: str) -> str:
    """Sortable, unique, and a valid Flyte execution name: lowercase, starts with a letter, 20 chars."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%y%m%d%H%M%S")
    return f"r{stamp}-{os.urandom(3).hex()}"


def default_backend() -> str:
    """The backend il.run and the CLI use when none is named: $INTERLOCK_BACKEND, else local."""
    return RunEnv.read().backend or DEFAULT_BACKEND


def default_workdir() -> Path:
    return Path(os.environ.get("INTERLOCK_WORKDIR", ".interlock"))
