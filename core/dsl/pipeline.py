"""``@il.pipeline``: record a pipeline body into a validated PipelineSpec."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.dsl.attempt import attempts_of
from interlock.core.dsl.build import (
    Builder,
    NodeHandle,
    Outputs,
    Promise,
    building,
    current_builder,
)
from interlock.core.dsl.finally_ import finally_blocks_of
from interlock.core.model.codecs import is_structured, to_jsonable, value_matches
from interlock.core.model.failure_policy import STOP, check_failure_policy
from interlock.core.model.graph import topological_order, validate
from interlock.core.model.names import check_step_name
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.policies import check_labels
from interlock.core.model.refs import importable_module, importing_by_reference
from interlock.core.model.spec import Binding, Port
from interlock.core.model.triggers import Cron, Trigger, check_triggers
from interlock.core.model.types import TypeSpec, is_named_tuple, type_of

# The keywords ``il.run`` keeps for itself, in its signature's order. Spelled here: il.run is in
# the backend layer, above dsl. tests/core/test_names_and_outputs.py checks it against il.run's
# signature.
RUN_OPTIONS = ("pipeline", "backend", "workdir", "run_id", "cache", "progress", "raise_on_failure", "options",
               "resume", "checkpoint_store", "pushgateway", "triggered_by")


def run_option_names() -> tuple[str, ...]:
    """The keywords ``il.run`` keeps for itself (everything else it passes on as parameters)."""
    return RUN_OPTIONS


def _refuse_run_option_names(fn: Callable[..., Any], pipeline: str) -> None:
    # il.run(p, cache=False) must mean one thing: a parameter with the name of one of il.run's
    # options would be swallowed by it (or be a TypeError from the CLI), so it is refused here.
    reserved = run_option_names()
    clash = [n for n in inspect.signature(fn).parameters if n in reserved]
    if clash:
        raise PipelineDefinitionError(
            f"pipeline parameter {clash[0]!r} has the name of an il.run option "
            f"(il.run keeps {', '.join(reserved)} for itself)",
            pipeline=pipeline, port=clash[0],
            hint=f"rename it (e.g. {clash[0]}_): il.run(p, {clash[0]}=...) would set the run option, not the parameter",
        )


def _triggers(schedule: str | None, triggers: Sequence[Trigger], pipeline: str) -> tuple[Trigger, ...]:
    if isinstance(triggers, str) or not isinstance(triggers, Sequence):
        raise PipelineDefinitionError(f"triggers={triggers!r} must be a list of triggers", pipeline=pipeline,
                                      hint='triggers=[il.Cron("0 3 * * *")]')
    return ((Cron(schedule),) if schedule else ()) + tuple(triggers)


class Pipeline:
    """A decorated pipeline. Its spec is built once, on first use, and cached."""

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        schedule: str | None = None,
        labels: Mapping[str, str] | None = None,
        failure_policy: str = STOP,
        triggers: Sequence[Trigger] = (),
    ):
        self.fn = fn
        self._call_name: str | None = None  # set on the copy .named() makes
        # The default from the function (fraud_retrain -> fraud-retrain); a name given is kept
        # as written (an Airflow DAG id, a Flyte workflow name), under the step-name rule.
        self.name = name or fn.__name__.replace("_", "-").lower()
        check_step_name(self.name, what="pipeline")
        _refuse_run_option_names(fn, self.name)
        self.triggers = _triggers(schedule, triggers, self.name)
        self.failure_policy = check_failure_policy(failure_policy, self.name)
        self.labels = check_labels(dict(labels or {}))
        self._spec: PipelineSpec | None = None
        self._functions: dict[str, Callable[..., Any]] = {}
        # A script's pipeline (python file.py) is referred to by its file's module name.
        self.ref: str = f"{importable_module(fn.__module__)}:{fn.__name__}"
        functools.update_wrapper(self, fn)

    @property
    def spec(self) -> PipelineSpec:
        if self._spec is None:
            self._spec = self._build()
        return self._spec

    @property
    def functions(self) -> dict[str, Callable[..., Any]]:
        """The step functions by step name, for in-process backends: steps defined in a
        notebook or a function body run locally without being importable."""
        _ = self.spec
        return dict(self._functions)

    def _params(self) -> list[Port]:
        try:
            hints = typing.get_type_hints(self.fn)
        except Exception as exc:
            raise PipelineDefinitionError(f"cannot resolve annotations: {exc}", pipeline=self.name) from exc
        params = []
        for pname, p in inspect.signature(self.fn).parameters.items():
            if pname not in hints:
                raise PipelineDefinitionError(
                    "pipeline parameter has no type annotation", pipeline=self.name, port=pname
                )
            t = type_of(hints[pname], where=f" in pipeline {self.name!r}, parameter {pname!r}")
            if t.is_artifact:
                raise PipelineDefinitionError(
                    f"pipeline parameters must be JSON values, not {t.describe()}", pipeline=self.name, port=pname,
                    hint="pass a URI or snapshot id (str) and load the artifact in a step",
                )
            has_default = p.default is not inspect.Parameter.empty
            default = p.default
            if has_default and is_structured(default) and value_matches(default, t):
                default = to_jsonable(default, t)
            elif has_default and not value_matches(default, t):
                raise PipelineDefinitionError(
                    f"default {default!r} does not match {t.describe()}", pipeline=self.name, port=pname
                )
            params.append(Port(pname, t, has_default, default))
        return params

    def _build(self) -> PipelineSpec:
        params = self._params()
        builder = Builder(self.name)
        with building(builder):
            args = {p.name: Promise(builder, Binding.of_param(p.name), p.type) for p in params}
            try:
                returned = self.fn(**args)
            except PipelineDefinitionError as exc:
                builder.raise_wiring_errors(also=exc)
                raise
            builder.raise_wiring_errors()
        outputs, output_types = self._outputs(builder, returned)
        self._functions = {name: s.fn for name, s in builder.steps.items()}
        order = topological_order(builder.nodes, pipeline=self.name, gates=builder.gates)
        blocks = finally_blocks_of(builder)  # il.finally_ around blocks; checks the calls
        for fin in [*((builder.finally_node,) if builder.finally_node else ()), *(b.node for b in blocks)]:
            if any(n.name == fin.name for n in order) or sum(b.node.name == fin.name for b in blocks) > 1:
                raise PipelineDefinitionError(
                    "duplicate node name", pipeline=self.name, step=fin.name,
                    hint="the il.finally_ step is also called in the body: name one call with step.named('...')",
                )
        spec = PipelineSpec(
            name=self.name,
            ref=self.ref,
            params=tuple(params),
            steps=tuple(s.spec for s in builder.steps.values()),
            nodes=tuple(order),
            gates=tuple(builder.gates),
            outputs=tuple(outputs),
            output_types=tuple(output_types),
            labels=tuple(sorted(self.labels.items())),
            triggers=self.triggers,
            doc=inspect.getdoc(self.fn) or "",
            finally_=builder.finally_node,
            subs=tuple(builder.subs),
            finally_blocks=blocks,
            failure_policy=self.failure_policy,
            failure_handlers=tuple(builder.failure_handlers),
            attempts=attempts_of(builder, outputs, self.failure_policy),
        )
        check_triggers(self.triggers, {p.name: p for p in params}, self.name)
        return validate(spec)

    def _outputs(self, builder: Builder, returned: Any) -> tuple[list[tuple[str, Binding]], list[tuple[str, TypeSpec]]]:
        if returned is None or isinstance(returned, NodeHandle):
            return [], []
        if isinstance(returned, Promise):
            named: list[tuple[str, Any]] = [("o0", returned)]
        elif isinstance(returned, Outputs):
            named = list(zip(returned._names, returned, strict=True))
        elif isinstance(returned, tuple) and is_named_tuple(type(returned)):
            named = list(zip(getattr(type(returned), "_fields"), returned, strict=True))  # noqa: B009
        elif isinstance(returned, tuple | list):
            named = [(f"o{i}", v) for i, v in enumerate(returned)]
        else:
            raise PipelineDefinitionError(
                f"a pipeline returns step outputs (one, a tuple or a NamedTuple), not {returned!r}",
                pipeline=self.name,
            )
        outs, types_ = [], []
        for out_name, value in named:
            if not isinstance(value, Promise) or value._builder is not builder:
                raise PipelineDefinitionError(
                    f"pipeline output {out_name!r} must be an output of a step of this pipeline, got {value!r}",
                    pipeline=self.name,
                )
            outs.append((out_name, value.binding))
            types_.append((out_name, value.type))
        return outs, types_

    def named(self, call_name: str) -> Pipeline:
        """The same pipeline, called as a sub-pipeline under another name (to call it twice)."""
        other = object.__new__(Pipeline)
        other.__dict__.update(self.__dict__)
        other._call_name = check_step_name(call_name, what="sub-pipeline call")
        return other

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        builder = current_builder()
        if builder is not None:  # a sub-pipeline: recorded into the calling pipeline (core/dsl/subpipeline.py)
            from interlock.core.dsl.subpipeline import call_subpipeline

            if args:
                raise PipelineDefinitionError(
                    "pass sub-pipeline parameters by keyword", pipeline=builder.name, step=self.name,
                )
            return call_subpipeline(self, builder, kwargs, self._call_name)
        raise PipelineDefinitionError(
            "a pipeline is not called directly",
            pipeline=self.name,
            hint=f"il.run({self.fn.__name__}, backend='local', ...) runs it; il.spec(...) shows its graph",
        )

    def __repr__(self) -> str:
        return f"<il.pipeline {self.name}>"


def pipeline(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    schedule: str | None = None,
    labels: Mapping[str, str] | None = None,
    failure_policy: str = STOP,
    triggers: Sequence[Trigger] = (),
) -> Any:
    """Declare a pipeline: ``@il.pipeline`` or ``@il.pipeline(name="fraud-retrain", triggers=[il.Cron("0 3 * * *")])``.

    ``triggers``: what starts it by itself (``il.Cron``, ``il.Every``, ``il.OnData``,
    ``il.OnDrift``; docs/triggers.md); ``schedule="0 3 * * *"`` is short for one ``il.Cron`` in UTC.

    ``failure_policy``: after a step fails, ``"stop"`` (the default) starts nothing new, the
    steps already running finish; ``"continue"`` runs every step that does not depend on a
    failed one (KFP's behaviour; Flyte ``FAIL_AFTER_EXECUTABLE_NODES_COMPLETE``). Either way
    the run fails, and the steps that did not start are ``not-run`` (docs/failure-semantics.md).
    """

    def decorate(f: Callable[..., Any]) -> Pipeline:
        p = Pipeline(f, name=name, schedule=schedule, labels=labels, failure_policy=failure_policy, triggers=triggers)
        if "<locals>" not in f.__qualname__ and not importing_by_reference():
            # A module's pipeline is built as the module is imported, as flytekit's @workflow and
            # kfp's @dsl.pipeline are: a wiring mistake fails the import, not a run hours later.
            # A body naming a step or sub-pipeline defined further down (a NameError now) is
            # built on first use; so is a pipeline defined inside a function, and one imported
            # by a step's task process (refs.importing_by_reference).
            try:
                _ = p.spec
            except NameError:
                pass
        return p

    return decorate(fn) if fn is not None else decorate


def spec(p: Pipeline | PipelineSpec) -> PipelineSpec:
    """The validated, backend-neutral PipelineSpec of a pipeline."""
    if isinstance(p, PipelineSpec):
        return validate(p)
    if not isinstance(p, Pipeline):
        raise PipelineDefinitionError(f"{p!r} is not an @il.pipeline")
    return p.spec
