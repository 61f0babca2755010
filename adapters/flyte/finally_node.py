"""``il.finally_`` on Flyte: the workflow's failure node for a failed body, a last node for a
succeeded one; both run the same task.

Flyte has no "always run" node. What it has is the failure node (``@workflow(on_failure=...)``,
``WorkflowTemplate.failure_node``): a task that runs when the workflow fails, whose inputs are
the workflow's inputs plus an optional ``err: FlyteError``. A succeeded body gets the same
task as its last node, downstream of every other node. So the finally step runs once whatever
the outcome, and it is one task in the registered workflow.

The task is the shim around the finally step, with the workflow's inputs (its other inputs are
parameters or constants, core/dsl/finally_.py) and ``err``. It computes ``il.RunStatus`` from the
run state (``settle`` over the step fragments), the rule every backend uses; on a cluster that
needs shared state (``INTERLOCK_STATE_DIR`` on a shared volume or bucket), and without it the
status still says failed with Flyte's error message.

The success-path node can itself fail; Flyte then runs the failure node, whose ``err`` names
that node: the task sees that the finally step already ran and does nothing (flyte-local
records the first call in the run instead, since flytekit names the failure node there).
"""

from __future__ import annotations

import inspect
from typing import Any

from flytekit.core.python_function_task import PythonFunctionTask
from flytekit.core.utils import _dnsify
from flytekit.exceptions.user import FlyteRecoverableException
from flytekit.types.error import FlyteError

from interlock.core.base.errors import PipelineDefinitionError, StepFailed
from interlock.core.model.codecs import revive
from interlock.core.model.finally_blocks import (
    block_of,
    block_spec,
    finally_inputs,
    handler_runs,
    is_handler,
)
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.record.outcomes import run_status, settle
from interlock.core.run.bindings import node_inputs
from interlock.core.run.runtime import execute_step

from . import policies
from .tasks import BACKEND, TaskOptions, _local_run, blank_task, py_ident, run_context, task_name
from .types import from_flyte, python_type

ERR = "err"  # the failure node's error input: flytekit and propeller fill it by this name


def node_id(node: Node) -> str:
    """The success-path node's id in its workflow (its failure shows in ``err.failed_node_id``)."""
    return _dnsify(node.name)


def _already_ran(node: Node, err: FlyteError | None) -> bool:
    local = _local_run()
    if local is not None:
        return node.name in local.raised or node.name in local.returned
    return err is not None and err.failed_node_id == node_id(node)


def finally_body(spec: PipelineSpec, node: Node | None = None, types: dict[str, Any] | None = None,
                 params_from: dict[str, str] | None = None) -> Any:
    """The task function: the whole pipeline's finally step (inputs: the workflow's), or a
    block's (``node``; inputs: its sub-workflow's, ``types``). ``params_from``: which input
    carries which pipeline parameter, where the names differ (a sub-pipeline call's sub-workflow
    names its inputs after the sub-pipeline's parameters)."""
    node = node or spec.finally_
    assert node is not None
    step = spec.step_of(node)
    block = block_of(spec, node.name)
    scope = block_spec(spec, block) if block is not None else spec

    def body(**kwargs: Any) -> None:
        err = kwargs.pop(ERR, None)
        if _already_ran(node, err):
            return None  # the finally step itself failed on the success path: never twice
        run = run_context(spec.name)
        failed = None if err is None else f"Flyte reported the run failed: {err.message}"
        status = run_status(settle(scope, run.state, None, failed=failed))
        if is_handler(spec, node.name) and not handler_runs(status):
            return None  # il.on_failure: its scope did not fail
        names = params_from or {p.name: p.name for p in spec.params}
        params = {param: from_flyte(kwargs[k], spec.param(param).type) for k, param in names.items()
                  if k in kwargs and spec.param(param) is not None}
        inputs = finally_inputs(spec, node, node_inputs(spec, node.name, params, {}), status)
        try:
            execute_step(run, step, node.name, inputs)
        except StepFailed as exc:
            if exc.backend_should_retry:
                raise FlyteRecoverableException(str(exc)) from exc
            raise
        return None

    ps = [
        inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=python_type(p.type),
                          **({"default": revive(p.default, p.type)} if p.has_default else {}))
        for p in spec.params
    ] if types is None else [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=t) for k, t in types.items()]
    ps.append(inspect.Parameter(ERR, inspect.Parameter.KEYWORD_ONLY, annotation=FlyteError | None, default=None))
    body.__signature__ = inspect.Signature(ps, return_annotation=None)  # type: ignore[attr-defined]
    body.__annotations__ = {p.name: p.annotation for p in ps} | {"return": None}
    body.__name__ = body.__qualname__ = py_ident(f"{node.name}_finally")
    body.__module__ = __name__
    body.__doc__ = step.doc or None
    return body


def build_finally_task(spec: PipelineSpec, options: TaskOptions | None = None, node: Node | None = None,
                       types: dict[str, Any] | None = None, params_from: dict[str, str] | None = None) -> PythonFunctionTask:
    """The finally step's task: the failure node, and the last node of a succeeded body (the
    workflow's, or with ``node`` and ``types`` a block's sub-workflow's)."""
    from interlock.core.run.env import RunEnv

    from .resolver import resolver

    node = node or spec.finally_
    assert node is not None
    if spec.param(ERR) is not None or ERR in (types or {}):
        raise PipelineDefinitionError(
            f"a pipeline parameter named {ERR!r} collides with the input Flyte's failure node receives its error in",
            pipeline=spec.name, step=node.name, hint=f"rename the parameter {ERR!r}",
        )
    options = options or TaskOptions()
    step = spec.step_of(node)
    env = {**RunEnv(pipeline=spec.name, backend=BACKEND, retry_in_process=options.in_process, on_cluster=True).to_env(),
           **options.environment}
    # Never cached: a finally step runs on every run (as KFP's exit task).
    kwargs = policies.task_kwargs(step, in_process=options.in_process, cache=False, image=options.image,
                                  environment=env)
    task = blank_task(PythonFunctionTask, task_name(spec, node.name), node.name, step.name, spec.ref)
    try:
        PythonFunctionTask.__init__(task, task_config=None, task_function=finally_body(spec, node, types, params_from),
                                    task_resolver=resolver, **kwargs)
    except (TypeError, ValueError, AssertionError) as exc:
        raise PipelineDefinitionError(f"flytekit rejected the finally task: {exc}", pipeline=spec.name,
                                      step=node.name) from exc
    return task


def call_last(node: Node, task: PythonFunctionTask, kwargs: dict[str, Any], spec: PipelineSpec | None = None) -> None:
    """Inside a workflow body, after every other node: the success path's finally node. A failure
    handler (il.on_failure) has none: it is Flyte's failure node alone, as ``on_failure=`` is."""
    from flytekit.core.context_manager import FlyteContextManager

    if spec is not None and is_handler(spec, node.name):
        return
    state = FlyteContextManager.current_context().compilation_state
    before = list(state.nodes) if state is not None else []
    result = task(**kwargs)
    if state is None or not state.nodes or state.nodes[-1] in before:
        return  # local execution: the body runs in order, so this already ran last
    last = state.nodes[-1]
    last._id = node_id(node)
    for n in before:  # downstream of every node: it runs once the whole body is done
        n.runs_before(last)
    del result
