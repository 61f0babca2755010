"""``@il.step``: a typed function plus its policies.

Decoration derives the step's ports from its annotations and validates its policies, so a
bad type or a bad quantity fails at import, naming the step. Calling a step inside an
``@il.pipeline`` body records a node and returns promises; calling it anywhere else just
runs the function (handy in unit tests).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import textwrap
import typing
from collections.abc import Callable, Mapping
from typing import Any, overload

from interlock.core.base.durations import parse_duration
from interlock.core.base.errors import PipelineDefinitionError, PolicyError
from interlock.core.model.codecs import TypeKind, is_structured, to_jsonable, value_matches
from interlock.core.model.joins import check_run_if
from interlock.core.model.names import check_step_name
from interlock.core.model.policies import Cache, Resources, check_labels
from interlock.core.model.policies_opt_in import CheckpointPolicy, Secret, Torchrun
from interlock.core.model.retry import Retry
from interlock.core.model.spec import Port, StepSpec
from interlock.core.model.types import TypeSpec, is_named_tuple, type_of


def code_fingerprint(fn: Callable[..., Any], version: str | None = None) -> str:
    """sha256 of the function's source (dedented) and an optional explicit version.

    Source rather than bytecode: it is stable across Python patch releases and what a
    reviewer sees change. Falls back to the code object when no source is available.
    """
    try:
        body = textwrap.dedent(inspect.getsource(fn)).encode()
    except (OSError, TypeError):
        code = fn.__code__
        body = code.co_code + repr(code.co_consts).encode()
    h = hashlib.sha256(body)
    if version:
        h.update(b"\0version\0" + version.encode())
    return h.hexdigest()


def _is_context(annotation: Any) -> bool:
    from interlock.core.run.context import StepContext

    return isinstance(annotation, type) and issubclass(annotation, StepContext)


def _jsonable_default(value: Any, t: TypeSpec) -> Any:
    return to_jsonable(value, t) if is_structured(value) and value_matches(value, t) else value



def build_step_spec(fn: Callable[..., Any], name: str, **policy: Any) -> StepSpec:
    where = f" in step {name!r}"
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # NameError on a forward ref, typically
        raise PipelineDefinitionError(f"cannot resolve annotations: {exc}", step=name) from exc
    sig = inspect.signature(fn)
    inputs: list[Port] = []
    context_arg = None
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise PipelineDefinitionError("*args/**kwargs are not portable; declare each input", step=name, port=pname)
        if pname not in hints:
            raise PipelineDefinitionError(
                "input has no type annotation", step=name, port=pname,
                hint="every step input needs a type so that edges can be checked before a run",
            )
        ann = hints[pname]
        if _is_context(ann):
            context_arg = pname
            continue
        t = type_of(ann, where=f"{where}, input {pname!r}")
        has_default = p.default is not inspect.Parameter.empty
        default = _jsonable_default(p.default, t) if has_default else None
        if has_default and not (value_matches(p.default, t) or (t.kind is TypeKind.DATACLASS and isinstance(default, dict))):
            raise PipelineDefinitionError(
                f"default {p.default!r} does not match the declared type {t.describe()}", step=name, port=pname
            )
        if has_default and t.is_artifact and p.default is not None:
            raise PipelineDefinitionError("artifact inputs can only default to None", step=name, port=pname)
        inputs.append(Port(pname, t, has_default, default))

    ret = hints.get("return", inspect.Signature.empty)
    if ret is inspect.Signature.empty:
        raise PipelineDefinitionError(
            "missing return annotation", step=name, hint="annotate the return type (-> None if it returns nothing)"
        )
    output_tuple = None
    if ret is None or ret is type(None):
        outputs: list[Port] = []
    elif is_named_tuple(ret):
        fhints = typing.get_type_hints(ret)
        outputs = [Port(f, type_of(fhints[f], where=f"{where}, output {f!r}")) for f in ret._fields]
        output_tuple = f"{ret.__module__}:{ret.__qualname__}"
    else:
        outputs = [Port("o0", type_of(ret, where=f"{where}, output"))]

    cache = policy.get("cache")
    if cache is True:
        cache = Cache()
    elif cache in (False, None):
        cache = None
    elif not isinstance(cache, Cache):
        raise PolicyError(f"cache={cache!r} must be il.Cache(...), True or False", step=name)
    version = policy.get("version") or (cache.version if cache else None)

    retry = policy.get("retry") or Retry()  # declares nothing: no retries, as on Flyte and KFP
    if isinstance(retry, int) and not isinstance(retry, bool):
        retry = Retry(retry)  # retry=3 ports flytekit's retries=3 / KFP's set_retry(3): any failure
    if not isinstance(retry, Retry):
        raise PolicyError(f"retry={retry!r} must be il.Retry(...)", step=name)

    resources = policy.get("resources") or Resources()
    if not isinstance(resources, Resources):
        raise PolicyError(f"resources={resources!r} must be il.Resources(...)", step=name)
    checkpoint = policy.get("checkpoint")
    if checkpoint is not None and not isinstance(checkpoint, CheckpointPolicy):
        raise PolicyError(f"checkpoint={checkpoint!r} must be il.CheckpointPolicy(...)", step=name)
    distributed = policy.get("distributed")
    if distributed is not None and not isinstance(distributed, Torchrun):
        raise PolicyError(f"distributed={distributed!r} must be il.Torchrun(...)", step=name)
    timeout = policy.get("timeout")
    if timeout is not None:
        timeout_s: float | None = parse_duration(timeout)
    else:
        timeout_s = None
    if timeout_s is not None and timeout_s <= 0:
        raise PolicyError(f"timeout={timeout!r} must be positive", step=name)
    secrets = tuple(policy.get("secrets") or ())
    for s in secrets:
        if not isinstance(s, Secret):
            raise PolicyError(f"secrets entries must be il.Secret(group, key); got {s!r}", step=name)
    try:
        labels = check_labels(dict(policy.get("labels") or {}))
    except PolicyError as exc:
        raise PolicyError(exc.message, step=name, hint=exc.hint) from exc

    return StepSpec(
        name=name,
        ref=f"{fn.__module__}:{fn.__qualname__}",
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        fingerprint=code_fingerprint(fn, version),
        context_arg=context_arg,
        output_tuple=output_tuple,
        resources=resources,
        retry=retry,
        cache=cache,
        checkpoint=checkpoint,
        interruptible=bool(policy.get("interruptible", False)),
        timeout_s=timeout_s,
        image=policy.get("image"),
        labels=tuple(sorted(labels.items())),
        annotations=tuple(sorted(dict(policy.get("annotations") or {}).items())),
        env=tuple(sorted(dict(policy.get("env") or {}).items())),
        secrets=secrets,
        distributed=distributed,
        doc=inspect.getdoc(fn) or "",
        may_skip=bool(policy.get("may_skip", False)),
    )


class Step:
    """A decorated step. ``.spec`` is its StepSpec; ``.fn`` the plain function."""

    def __init__(self, fn: Callable[..., Any], spec: StepSpec, node_name: str | None = None,
                 run_if: str | None = None):
        self.fn = fn
        self.spec = spec
        self._node_name = node_name
        self.run_if = run_if  # the join rule of its calls (core/model/joins.py); a call may give its own
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return self.spec.name

    def named(self, node_name: str) -> Step:
        """The same step, recorded under another node name (to call it twice in one pipeline)."""
        return Step(self.fn, self.spec, check_step_name(node_name, what="node"), self.run_if)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from interlock.core.dsl.build import current_builder

        builder = current_builder()
        if builder is None:
            return self._call_directly(*args, **kwargs)
        if args:
            raise PipelineDefinitionError(
                "pass step inputs by keyword inside a pipeline", pipeline=builder.name, step=self.name,
                hint=f"{self.name}({', '.join(p.name + '=...' for p in self.spec.inputs)})",
            )
        return builder.add_node(self, kwargs, self._node_name)

    def _call_directly(self, *args: Any, **kwargs: Any) -> Any:
        from interlock.core.dsl.build import Promise

        for v in (*args, *kwargs.values()):
            if isinstance(v, Promise):
                raise PipelineDefinitionError(
                    f"{v.describe()} used outside its pipeline", step=self.name,
                    hint="step outputs only exist inside the @il.pipeline function that produced them",
                )
        if self.spec.context_arg and self.spec.context_arg not in kwargs:
            from interlock.core.run.context import StepContext

            kwargs[self.spec.context_arg] = StepContext.local(self.spec.name)
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<il.step {self.name}>"


@overload
def step(fn: Callable[..., Any], /) -> Step: ...
@overload
def step(
    *,
    name: str | None = None,
    resources: Resources | None = None,
    retry: Retry | int | None = None,
    cache: Cache | bool | None = None,
    checkpoint: CheckpointPolicy | None = None,
    interruptible: bool = False,
    timeout: str | float | None = None,
    image: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    secrets: list[Secret] | None = None,
    distributed: Torchrun | None = None,
    version: str | None = None,
    run_if: str | None = None,
    may_skip: bool = False,
) -> Callable[[Callable[..., Any]], Step]: ...
def step(fn: Callable[..., Any] | None = None, /, **policy: Any) -> Any:
    """Declare a step: ``@il.step`` or ``@il.step(resources=..., retry=..., cache=...)``.

    ``run_if``: its join rule (core/model/joins.py), also given per call (``join(..., run_if=...)``);
    ``may_skip=True``: it may raise ``il.Skip`` to end skipped."""
    allowed = {
        "name", "resources", "retry", "cache", "checkpoint", "interruptible", "timeout", "image",
        "labels", "annotations", "env", "secrets", "distributed", "version", "run_if", "may_skip",
    }
    unknown = set(policy) - allowed
    if unknown:
        raise PolicyError(f"unknown step option(s) {sorted(unknown)}; known: {sorted(allowed)}")

    def decorate(f: Callable[..., Any]) -> Step:
        if isinstance(f, Step):
            raise PipelineDefinitionError(f"{f.name} is already a step")
        name = check_step_name(policy.get("name") or f.__name__)
        try:
            # `name` is positional in build_step_spec; passing it twice was a TypeError.
            spec = build_step_spec(f, name, **{k: v for k, v in policy.items() if k not in ("name", "run_if")})
            run_if = policy.get("run_if")
            rule = check_run_if(run_if, step=name).value if run_if is not None else None
        except PipelineDefinitionError as exc:
            if exc.step is None:
                raise type(exc)(exc.message, step=name, hint=exc.hint) from exc
            raise
        return Step(f, spec, run_if=rule)

    return decorate(fn) if fn is not None else decorate
