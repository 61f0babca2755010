"""The backend seam: small Protocols, found through the ``interlock.backends`` entry points.

A backend plays one role or both: a ``Compiler`` turns a PipelineSpec into native files (IR
YAML, protobufs), a ``Runner`` runs it. A compile-only backend (``flyte``, ``kfp``) has no
``run`` at all. Core validates parameters, run and compile options and capabilities first,
so every backend refuses the same mistakes the same way. Adding a backend means one package
and one entry point; no other backend changes.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from interlock.core.base import plugins
from interlock.core.base.errors import (
    CapabilityError,
    PipelineDefinitionError,
    PolicyError,
    RunIdError,
)
from interlock.core.base.suggest import did_you_mean
from interlock.core.model.codecs import TypeKind, json_problem, to_jsonable, value_matches
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.triggers import Cause
from interlock.core.record.outcomes import RunResult
from interlock.core.run.env import RunEnv, run_dir_under

ENTRY_POINT_GROUP = plugins.BACKENDS.entry_point
DEFAULT_BACKEND = "local"

# Features a pipeline may use; each backend says "native", "emulated: <how>" or "unsupported".
FEATURES = (
    "gpu", "accelerator", "shared_memory", "node_selector", "tolerations", "interruptible", "timeout",
    "retry.transient", "retry.contention_backoff", "retry.preempted", "retry.fatal_stop", "cache",
    "retry.any_backoff",  # Retry(N, wait=il.Backoff(...))
    "checkpoint", "gates", "condition.expression", "condition.or", "branch.chain", "branch.value",
    "finally",  # il.finally_ (core/dsl/finally_.py)
    "subpipeline", "subpipeline.cache",  # an @il.pipeline called in another (core/dsl/subpipeline.py)
    "finally.block",  # with il.finally_(step): ... around one block
    "subpipeline.finally",  # il.finally_ in a sub-pipeline's body: scoped to each call
    "secrets", "labels", "queue", "distributed", "run",
    "trigger.cron", "trigger.every", "trigger.data", "trigger.drift",  # il.pipeline(triggers=[...]); schedule= is one il.Cron
    "map", "map.tolerate", "map.zip", "fan_in",  # map.zip: il.map(step, over=il.zip(a=xs, b=ys))
    "map.subpipeline",  # il.map over an @il.pipeline: its body once per item (core/model/submaps.py)
    "map.fields",  # il.map(..., fields=True): each field of a record item to its input (core/model/map_fields.py)
    "resume",  # `interlock run --resume RUN_ID`: what a resumed run keeps and re-runs
    "failure_policy.stop", "failure_policy.continue",  # il.pipeline(failure_policy=...)
    "on_failure",  # il.on_failure: a finally step that runs only when its scope failed
    "join.run_if",  # il.step(run_if=...): a join rule other than the default (core/model/joins.py)
    "skip",  # @il.step(may_skip=True): a step that may raise il.Skip
    "finally.block.reads_output",  # an il.finally_ step reading an output of its scope's steps
    "finally.block.nested",  # with il.finally_(...) inside another (setup/teardown pairs nested)
    "fallback",  # with il.attempt() as tried: ... with tried.fallback(): ... (core/dsl/attempt.py)
    "types.model_files",  # a dataclass or pydantic model with a field of a file kind (il.Dataset...)
)

_O = TypeVar("_O", bound="BackendOptions")


@dataclass(frozen=True)
class BackendOptions:
    """Base of a backend's options, for each role: run options (``il.run(..., options=...)``,
    ``interlock run --option K=V``) and compile options (``il.compile(..., **options)``,
    ``interlock compile --option K=V``).

    A backend that takes options subclasses this with a frozen dataclass of plain fields
    (bool, int, float, str, or Optional of those) and names the class in its
    ``Capabilities.run_options`` or ``compile_options``; this base itself is "no options".
    A field of another type (a tuple) is read by the subclass's ``convert``.
    """

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_mapping(cls: type[_O], values: Mapping[str, Any], *, backend: str, role: str = "run") -> _O:
        """Options from keywords; string values (the CLI's) are read as each field's type."""
        names = cls.names()
        unknown = sorted(set(values) - set(names))
        if unknown:
            accepted = f"its options are: {', '.join(names)}" if names else f"it takes no {role} options"
            raise PolicyError(
                f"backend {backend!r} has no {role} option(s) {unknown}; {accepted}",
                hint=f"`interlock backends` lists each backend's {role} options",
            )
        hints = typing.get_type_hints(cls)
        converted = cls.convert(dict(values))
        return cls(**{k: _option_value(backend, k, v, hints[k], role) for k, v in converted.items()})

    @classmethod
    def convert(cls, values: dict[str, Any]) -> dict[str, Any]:
        """The given values, with those of fields that are not plain (a tuple) turned into the
        field's type: a subclass with such fields overrides this (the CLI gives every value as text)."""
        return values

    @classmethod
    def of(cls: type[_O], options: RunOptions | BackendOptions | None) -> _O:
        """This backend's options from a RunOptions or as given (the defaults when none were)."""
        given = options.backend_options if isinstance(options, RunOptions) else options
        return given if isinstance(given, cls) else cls()


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _option_value(backend: str, name: str, value: Any, hint: Any, role: str = "run") -> Any:
    """``value`` as option ``name``'s declared type; strings are parsed, others checked."""
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    allowed = typing.get_args(hint) if union else (hint,)
    optional = type(None) in allowed
    target = next((t for t in allowed if t is not type(None)), str)
    if optional and (value is None or value == "null"):  # JSON's null, as for -p parameters
        return None
    target = typing.get_origin(target) or target  # tuple[str, ...]: a tuple (``convert`` made it)
    if isinstance(value, str) and target in (bool, int, float):
        text = value.strip().lower()
        try:
            if target is bool:
                if text not in _TRUE + _FALSE:
                    raise ValueError(value)
                return text in _TRUE
            return target(value)
        except (TypeError, ValueError) as exc:
            raise PolicyError(
                f"backend {backend!r}: {role} option {name}={value!r} is not of type {target.__name__}"
            ) from exc
    if not isinstance(value, target) or (target is not bool and isinstance(value, bool)):
        if not (target is float and isinstance(value, int) and not isinstance(value, bool)):
            raise PolicyError(
                f"backend {backend!r}: {role} option {name}={value!r} is not of type {target.__name__}"
            )
    return value


@dataclass(frozen=True)
class Capabilities:
    backend: str
    features: dict[str, str]
    lossy: tuple[str, ...] = ()  # mappings that lose information, and what the adapter does instead
    description: str = ""
    run_options: type[BackendOptions] = BackendOptions  # what ``il.run(options=...)`` takes
    compile_options: type[BackendOptions] = BackendOptions  # what ``il.compile(**options)`` takes
    # The variable in which the orchestrator hands a task its run id at run time, when the
    # compiler cannot write INTERLOCK_RUN_ID (KFP: the pod's run label); None: not needed.
    run_id_env: str | None = None

    def supports(self, feature: str) -> bool:
        return not self.features.get(feature, "unsupported").startswith("unsupported")


@dataclass
class RunOptions:
    run_id: str
    workdir: Path
    cache: bool = True
    sleeper: Callable[[float], None] = time.sleep
    progress: Callable[[str, str, str], None] | None = None  # (node, event, detail)
    # The pipeline's in-process step functions by step name (il.run passes them from a
    # Pipeline; a bare spec has none, and backends import steps by reference instead).
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    # The backend's own options (its Capabilities.run_options); None: its defaults.
    backend_options: BackendOptions | None = None
    # Where steps without their own CheckpointPolicy(store=) keep checkpoints (a path or a
    # store URI); None: the run's own folder.
    checkpoint_store: str | None = None
    # Why the run started (a trigger's Cause, ``interlock watch``); None: started by hand.
    triggered_by: Cause | None = None

    def __post_init__(self) -> None:
        check_run_id(self.run_id)  # every backend, also when called without il.run
        self.workdir = Path(self.workdir)

    @property
    def run_dir(self) -> Path:
        return run_dir_under(self.workdir, self.run_id)

    @property
    def cache_dir(self) -> Path:
        return self.workdir / "cache"

    def emit(self, node: str, event: str, detail: str = "") -> None:
        if self.progress:
            self.progress(node, event, detail)




@runtime_checkable
class Backend(Protocol):
    """What every backend has: a name and its capabilities. It also plays one role or both."""

    name: str

    def capabilities(self) -> Capabilities: ...


@runtime_checkable
class Compiler(Backend, Protocol):
    """A backend that compiles a spec into files a platform accepts."""

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        """Write the files into ``out``; ``options``: an instance of its ``compile_options``."""
        ...


@runtime_checkable
class Runner(Backend, Protocol):
    """A backend that runs a spec here and returns its RunResult."""

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult: ...


@runtime_checkable
class TriggerApplier(Backend, Protocol):
    """A compile backend whose triggers live on the platform, not in the compiled files (KFP's
    recurring runs): ``interlock triggers apply --backend NAME`` hands it the spec and the
    compile output folder, and it creates or updates them there."""

    def apply_triggers(self, spec: PipelineSpec, compiled: Path, options: BackendOptions) -> list[str]:
        """Create or update the triggers; one line per trigger saying what was done.
        ``options``: an instance of its ``compile_options``."""
        ...


# -- discovery -------------------------------------------------------------------------------
_registered: dict[str, Any] = plugins.registry(plugins.BACKENDS)


def register_backend(name: str, factory: Callable[[], Compiler | Runner]) -> None:
    """Register a backend in-process (tests, notebooks); entry points are the normal route."""
    plugins.register(plugins.BACKENDS, name, factory)


def available_backends() -> dict[str, Any]:
    return plugins.installed(plugins.BACKENDS)


def get_backend(name: str) -> Compiler | Runner:
    backend: Compiler | Runner = plugins.create(plugins.BACKENDS, name, (Compiler, Runner), "Backend")
    return backend


# -- checks every backend gets -----------------------------------------------------------------
def features_used(spec: PipelineSpec) -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}

    def mark(feature: str, where: str) -> None:
        used.setdefault(feature, []).append(where)

    for node in (*spec.nodes, *spec.finally_nodes()):
        s = spec.step_of(node)
        r = s.resources
        checks = {
            "gpu": r.gpu > 0, "accelerator": bool(r.accelerator), "shared_memory": bool(r.shared_memory),
            "node_selector": bool(r.node_selector), "tolerations": bool(r.tolerations),
            "interruptible": s.interruptible, "timeout": s.timeout_s is not None,
            "cache": bool(s.cache and s.cache.enabled), "checkpoint": s.checkpoint is not None,
            "secrets": bool(s.secrets), "labels": bool(s.labels or s.annotations),
            "distributed": s.distributed is not None, "queue": bool(r.queue),
            "retry.any_backoff": s.retry.wait is not None,
        }
        for feature, on in checks.items():
            if on:
                mark(feature, node.name)
    for node in spec.nodes:
        if node.map is not None:
            mark("map", node.name)
            if node.map.tolerant:
                mark("map.tolerate", node.name)
            if node.map.zipped:
                mark("map.zip", node.name)
            if node.map.fields:
                mark("map.fields", node.name)
        if any(b.kind == "list" for _, b in node.inputs):
            mark("fan_in", node.name)
    if spec.gates:
        mark("gates", ", ".join(g.id for g in spec.gates))
        for g in spec.gates:
            if g.expr is not None:
                mark("condition.expression", g.id)
            # A chain's later block is rendered from its own condition (dsl.Elif, Flyte elif_):
            # the negations of the earlier ones in its effective condition are the backend's.
            own = g.own if g.follows is not None else g.expr
            if own is not None and _has_or(own):
                mark("condition.or", g.id)
            if g.follows is not None:
                mark("branch.chain", g.id)
        for _, b in [*spec.outputs, *(i for n in spec.nodes for i in n.inputs)]:
            if b.kind == "one_of":
                mark("branch.value", b.describe())
    if spec.finally_ is not None:
        mark("finally", spec.finally_.name)
    for c in spec.subs:
        mark("subpipeline", c.name)
        if c.map is not None:
            mark("map.subpipeline", c.name)
            if c.map.tolerant:
                mark("map.tolerate", c.name)
            if c.map.zipped:
                mark("map.zip", c.name)
            if c.map.fields:
                mark("map.fields", c.name)
    from interlock.core.model.finally_blocks import is_call_finally, outer_block

    for block in spec.finally_blocks:
        mark("subpipeline.finally" if is_call_finally(spec, block) else "finally.block", block.node.name)
        if not is_call_finally(spec, block) and outer_block(spec, block) is not None:
            mark("finally.block.nested", block.node.name)
    from interlock.core.model.triggers import FEATURE

    for i, trig in enumerate(spec.triggers):
        mark(FEATURE[trig.kind], trig.label(i))
    for name in spec.failure_handlers:
        mark("on_failure", name)
    for a in spec.attempts:
        mark("fallback", a.name)
    from interlock.core.model.codecs import file_fields

    for step in spec.steps:  # a model carrying a file: its fields move as folders beside its JSON
        if any(file_fields(p.type) for p in (*step.inputs, *step.outputs)):
            mark("types.model_files", step.name)
    for node in spec.nodes:
        if node.run_if is not None and not any(node.name in a.fallback for a in spec.attempts):
            mark("join.run_if", node.name)  # a fallback's own all_done is the fallback's (row `fallback`)
        if spec.step_of(node).may_skip:
            mark("skip", node.name)
    for node in spec.finally_nodes():
        if any(b.kind == "output" for _, b in node.inputs):
            mark("finally.block.reads_output", node.name)
    if spec.failure_policy != "stop":  # "stop" is every pipeline's default: each backend must have it
        mark(f"failure_policy.{spec.failure_policy}", spec.name)
    return used


def _has_or(cond: Any) -> bool:
    from interlock.core.model.conditions import Op

    c = cond.without_not()
    return c.op is Op.OR or any(_has_or(t) for t in c.terms)


def as_runner(spec: PipelineSpec, backend: Compiler | Runner) -> tuple[Runner, Capabilities]:
    """The backend in its run role, and its capabilities; refused when it has no ``run`` or
    declares running unsupported (compile-only)."""
    caps = backend.capabilities()
    if not (isinstance(backend, Runner) and caps.supports("run")):
        how = caps.features.get("run", "").partition(":")[2].strip()  # "unsupported: <what to do>"
        raise CapabilityError(
            f"backend {caps.backend!r} compiles only; it cannot run pipelines here",
            pipeline=spec.name, hint=how or f"compile with --backend {caps.backend}, or run with a local backend",
        )
    return backend, caps


def as_compiler(spec: PipelineSpec, backend: Compiler | Runner) -> tuple[Compiler, Capabilities]:
    """The backend in its compile role, and its capabilities; refused when it has no ``compile``."""
    caps = backend.capabilities()
    if not isinstance(backend, Compiler):
        raise CapabilityError(
            f"backend {caps.backend!r} runs only; it cannot compile pipelines",
            pipeline=spec.name, hint="`interlock backends` lists what each backend does",
        )
    return backend, caps


def run_options_for(caps: Capabilities, given: BackendOptions | Mapping[str, Any] | None) -> BackendOptions:
    """The backend's run options from what the caller gave: its own options object, keywords
    (strings read as each field's type), or nothing (its defaults)."""
    return _options_for(caps.backend, caps.run_options, given, "run")


def compile_options_for(caps: Capabilities, given: BackendOptions | Mapping[str, Any] | None) -> BackendOptions:
    """The backend's compile options from what the caller gave, read as run options are."""
    return _options_for(caps.backend, caps.compile_options, given, "compile")


def _options_for(
    backend: str, cls: type[BackendOptions], given: BackendOptions | Mapping[str, Any] | None, role: str
) -> BackendOptions:
    if given is None:
        return cls()
    if isinstance(given, BackendOptions):
        if type(given) is not cls:  # exactly: another backend's options would be ignored silently
            raise PolicyError(f"backend {backend!r} takes {cls.__name__} {role} options, not {type(given).__name__}")
        return given
    return cls.from_mapping(given, backend=backend, role=role)


# What to write instead, where core knows the feature's alternatives.
_INSTEAD = {
    "condition.or": "the condition is a disjunction (an `|`, or the `~` of an `&`): write each alternative as "
    "its own block (`with il.when(a):` ... `with il.when(b):`; an il.when/il.elif_ chain when only one may run), "
    "or use a backend whose conditions have `|` (`interlock backends` lists them)",
}


def check_capabilities(spec: PipelineSpec, caps: Capabilities) -> None:
    """Refuse a pipeline that uses a feature the backend cannot express, naming the author's
    construct (an il.when block by its condition and line, not its internal gate id)."""
    from interlock.core.model.conditions import gate_label

    blocks = {g.id: f"il.when({gate_label(g)})" + (f" at {g.source}" if g.source else "") for g in spec.gates}
    for feature, where in features_used(spec).items():
        if not caps.supports(feature):
            how = caps.features.get(feature, "unsupported")
            why = how.partition("(")[2].partition(")")[0] if "(" in how else ""
            users = ", ".join(blocks.get(w, w) for w in where)
            raise CapabilityError(
                f"backend {caps.backend!r} cannot express {feature!r} (used by {users}){f': {why}' if why else ''}",
                pipeline=spec.name, step=None if where[0] in blocks else where[0],
                # The backend's own words after "unsupported: " say what to write instead, where it has them.
                hint=_INSTEAD.get(feature) or how.partition("unsupported:")[2].strip()
                or "`interlock backends` lists what each backend supports",
            )


def resolve_params(spec: PipelineSpec, params: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - {p.name for p in spec.params})
    if unknown:
        names = [p.name for p in spec.params]
        raise PipelineDefinitionError(
            f"unknown parameter(s) {unknown}; parameters are {names}",
            pipeline=spec.name, port=unknown[0], hint=did_you_mean(unknown[0], names),
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
            among = f": one of {list(p.type.choices)}" if p.type.choices and p.type.name else ""
            raise PipelineDefinitionError(
                f"parameter value {value!r} ({type(value).__name__}) does not fit {p.type.describe()}{among}",
                pipeline=spec.name, port=p.name,
            )
        # An Enum member is recorded and handed to every backend as its value; each step gets
        # the member back (the shim revives inputs of a named type).
        resolved[p.name] = to_jsonable(value, p.type) if p.type.choices else value
    return resolved


# One rule for every backend, the strictest of them: a Flyte execution name (it also names
# Kubernetes objects, so it must be a DNS label) of at most 20 characters. A KFP run name
# and a local folder name accept every such id, and it can never climb out of a directory.
RUN_ID_MAX = 20
RUN_ID_RULE = (
    f"a run id is 1-{RUN_ID_MAX} lowercase letters, digits and '-', starting with a letter and "
    "not ending with '-' (a Flyte execution name)"
)
_RUN_ID = re.compile(rf"[a-z](?:[a-z0-9-]{{0,{RUN_ID_MAX - 2}}}[a-z0-9])?")


def check_run_id(run_id: str) -> str:
    """``run_id`` if it follows RUN_ID_RULE; else RunIdError naming the rule (CLI exit 2)."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise RunIdError(f"run id {run_id!r} is not valid: {RUN_ID_RULE}", hint="e.g. --run-id fraud-1130a")
    return run_id


def new_run_id(pipeline: str) -> str:
    """Sortable, unique, and a valid Flyte execution name: lowercase, starts with a letter, 20 chars."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%y%m%d%H%M%S")
    return f"r{stamp}-{os.urandom(3).hex()}"


def default_backend() -> str:
    """The backend il.run and the CLI use when none is named: $INTERLOCK_BACKEND, else local."""
    return RunEnv.read().backend or DEFAULT_BACKEND


def default_workdir() -> Path:
    return Path(os.environ.get("INTERLOCK_WORKDIR", ".interlock"))
