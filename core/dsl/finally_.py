"""``il.finally_``: a step that runs after the pipeline whatever its outcome, and sees it.

    @il.step
    def notify(status: il.RunStatus, channel: str) -> None:
        if not status.succeeded:
            post(channel, f"{status.failed_steps}: {status.error}")

    @il.pipeline(name="train")
    def train(channel: str = "#ml"):
        il.finally_(notify, channel=channel)
        ...

The step declares at most one input of type ``il.RunStatus``; the backend fills it with the
body's final status (a step without one is a plain cleanup, as a KFP exit task that is a plain
component). Its other inputs are parameters, constants, or Optional outputs of the body's
steps (a teardown reading the id its setup created: ``il.finally_(teardown, cluster_id=c)``
after the setup for the whole pipeline, ``block.bind(cluster_id=c)`` inside a ``with
il.finally_(teardown) as block:``), which read None when the step never produced them.
``il.on_failure(step, ...)`` is written and scoped the same way, and its step runs
only when its scope failed (Flyte's ``on_failure=``); otherwise it is skipped. At most one per pipeline, written at the top level of the body (not inside
an ``il.when`` block): its scope is the whole pipeline. The run's status is the body's, and
failed as well when the finally step itself fails. Written in a sub-pipeline's body, its scope
is each call of the sub-pipeline (core/dsl/subpipeline.py): a :class:`FinallyBlock` over the call's
nodes, recorded as the call's ``finally_``, rendered by the call's own sub-workflow (Flyte) or
nested pipeline (KFP).

Rendered natively: KFP ``dsl.ExitHandler`` around the body with the step as its exit task
(``dsl.PipelineTaskFinalStatus``); ``local`` runs it last. Every backend derives the status
from the same run state (``settle`` over the step fragments), so the finally step receives
the same ``RunStatus`` everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.base.suggest import did_you_mean
from interlock.core.model.codecs import qualname
from interlock.core.model.finally_blocks import RunStatus
from interlock.core.model.pipeline_spec import FinallyBlock
from interlock.core.model.spec import BindingKind

if TYPE_CHECKING:
    from interlock.core.dsl.step import Step
    from interlock.core.model.pipeline_spec import Node


















class _FinallyCall:
    """What ``il.finally_(...)`` returns: used as ``with``, it scopes the finally step to the block."""

    def __init__(self, builder: Any, node: Node):
        self._builder = builder
        self._node = node
        self._start: int | None = None
        self._open = False

    def bind(self, **kwargs: Any) -> None:
        """Hand the block's finally step outputs of the block's own steps, once they are called
        (a teardown reading the id of the cluster its setup created): inside the ``with`` block,
        ``block.bind(cluster_id=cluster.id)``. Each input is Optional (``cluster_id: str | None =
        None``): it reads None when the step never produced the value (it failed first)."""
        from dataclasses import replace

        from interlock.core.dsl.build import Promise

        b = self._builder
        if self._start is None or not self._open:
            raise PipelineDefinitionError(
                "bind() hands a block's finally step the outputs of the block's steps: call it inside the block",
                pipeline=b.name, step=self._node.name,
                hint="with il.finally_(teardown) as block:\n    c = setup(...)\n    block.bind(cluster_id=c)",
            )
        spec = b.steps[self._node.step].spec
        members = {n.name for n in b.nodes[self._start:]}
        bindings = dict(self._node.inputs)
        for name, value in kwargs.items():
            port = spec.input(name)
            if port is None:
                raise PipelineDefinitionError(
                    f"unknown argument {name!r}; inputs are {[p.name for p in spec.inputs]}", pipeline=b.name,
                    step=self._node.name, port=name, hint=did_you_mean(name, [p.name for p in spec.inputs]))
            if not (isinstance(value, Promise) and value.binding.kind is BindingKind.OUTPUT
                    and value.binding.node in members):
                raise PipelineDefinitionError(
                    "bind() takes outputs of the steps called in this block so far", pipeline=b.name,
                    step=self._node.name, port=name, hint="pass parameters and constants to il.finally_(...) itself",
                )
            _check_optional(b, self._node.name, name, port.type)
            bindings[name] = b._bind(value, self._node.name, name, port.type, reads_missing=True)
        self._node = replace(self._node, inputs=tuple(bindings.items()))

    def __enter__(self) -> _FinallyCall:
        b = self._builder
        # Blocks nest (Airflow's setup/teardown inside another pair, Python's try/finally inside
        # another): the inner finally step runs when the inner block ends, and the outer block's
        # status covers the inner block whole, its finally step included.
        if b.finally_node is self._node:
            b.finally_node = None  # not the whole pipeline's: this block's
        if b.finally_pending is self._node:
            b.finally_pending = None
        b.finally_open += 1
        self._open = True
        self._start = len(b.nodes)
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> Literal[False]:
        b = self._builder
        b.finally_open -= 1
        self._open = False
        if exc_type is not None:
            return False
        members = tuple(n.name for n in b.nodes[self._start or 0:])
        if not members:
            raise PipelineDefinitionError(
                "an il.finally_ block records no step", pipeline=b.name, step=self._node.name,
                hint="call the block's steps inside the `with il.finally_(...):` block",
            )
        # An il.elif_ after the block may not continue a chain from inside it (one exit handler group).
        b.last_block = None
        b.finally_blocks.append(FinallyBlock(self._node, members))
        return False


def finally_blocks_of(builder: Any) -> tuple[FinallyBlock, ...]:
    """The il.finally_ blocks a pipeline body recorded; refuses a second whole-pipeline one."""
    pending = builder.finally_pending
    if pending is not None:
        raise PipelineDefinitionError(
            "a pipeline has at most one il.finally_ step for the whole body", pipeline=builder.name, step=pending.name,
            hint="call the other cleanups from one finally step, or scope one to a block: `with il.finally_(step): ...`",
        )
    return tuple(builder.finally_blocks)


def call_finally(builder: Any) -> Node | None:
    """The whole-body il.finally_ step recorded in the sub-pipeline call being closed (its scope:
    that call); refuses a second one, as for a pipeline."""
    finally_blocks_of(builder)
    return builder.finally_node










def _check_optional(builder: Any, node: str, port: str, t: Any) -> None:
    if not t.optional:
        raise PipelineDefinitionError(
            f"a finally step reads parameters and constants only, or Optional outputs of the body's steps: this "
            f"output may not exist (its step failed before producing it), but the input is {t.describe()}",
            pipeline=builder.name, step=node, port=port,
            hint=f"declare it Optional ({port}: {t.describe()} | None = None): it reads None then",
        )


def finally_(step: Step, **kwargs: Any) -> _FinallyCall:
    """Run ``step`` after the whole pipeline, whatever its outcome, with its ``il.RunStatus`` (if it
    declares one); as ``with il.finally_(step): ...``, after that block only, with the block's status."""
    return _record(step, kwargs, "il.finally_")


def on_failure(step: Step, **kwargs: Any) -> _FinallyCall:
    """Run ``step`` only if the whole pipeline failed (Flyte's ``on_failure=``), with its
    ``il.RunStatus`` (if it declares one); as ``with il.on_failure(step): ...``, only if that block
    failed. Written and scoped as ``il.finally_``; when its scope did not fail it is ``skipped``."""
    from interlock.core.dsl.build import current_builder

    call = _record(step, kwargs, "il.on_failure")
    if step.spec.outputs:
        raise PipelineDefinitionError(
            "a failure handler returns nothing: no step can read what it returns", pipeline=current_builder().name,
            step=call._node.name, hint=f"def {step.spec.name}(status: il.RunStatus, ...) -> None",
        )
    current_builder().failure_handlers.append(call._node.name)
    return call


def _record(step: Step, kwargs: dict[str, Any], what: str) -> _FinallyCall:
    from interlock.core.dsl.build import current_builder

    builder = current_builder()
    if builder is None:
        raise PipelineDefinitionError(f"{what} is only meaningful inside an @il.pipeline function")
    # Inside a sub-pipeline its scope is the call: the il.when blocks around the call are the caller's.
    base = builder.sub_gate_depths[-1] if builder._sub_stack else 0
    if len(builder._gate_stack) > base:
        raise PipelineDefinitionError(
            f"{what} inside an il.when block: its scope is the whole pipeline (or the sub-pipeline call)",
            pipeline=builder.name, step=step.spec.name,
            hint=f"call {what} at the top level of the pipeline body (or of another `with il.finally_` block), "
            "and the il.when block inside it",
        )
    pending = builder.finally_pending
    if pending is not None:
        raise PipelineDefinitionError(
            "a pipeline has at most one il.finally_ step for the whole body", pipeline=builder.name,
            step=pending.name,
            hint="call the other cleanups from one finally step, or scope one to a block: `with il.finally_(step): ...`",
        )
    want = qualname(RunStatus)
    ports = [p.name for p in step.spec.inputs if p.type.name == want]
    # None or one status input: a plain cleanup (a KFP exit task that is a plain component) or one
    # that sees how its scope ended.
    if len(ports) > 1 or ports and step.spec.inputs[[p.name for p in step.spec.inputs].index(ports[0])].type.optional:
        raise PipelineDefinitionError(
            f"a finally step declares at most one input of type il.RunStatus, not Optional (found {len(ports)})",
            pipeline=builder.name, step=step.spec.name, hint="def cleanup(status: il.RunStatus, ...) -> None",
        )
    if ports and ports[0] in kwargs:
        raise PipelineDefinitionError(
            "the il.RunStatus input is filled by the backend; do not pass it",
            pipeline=builder.name, step=step.spec.name, port=ports[0],
        )
    before = len(builder.nodes)
    # Recorded like any call (type checks, names), with a placeholder status, then taken out
    # of the body: backends that know il.finally_ run it after everything else.
    status = {ports[0]: RunStatus("pending")} if ports else {}
    # Under all_done it may read an Optional output from inside an il.when block (None when not run).
    rule = {"run_if": "all_done"} if step.spec.input("run_if") is None else {}
    builder.add_node(step, {**kwargs, **status, **rule}, getattr(step, "_node_name", None))
    node = builder.nodes.pop(before)
    builder._node_gate.pop(node.name, None)
    if node.gate is not None:  # in a sub-pipeline called inside an il.when: the call's gate is its (block_gate)
        from dataclasses import replace

        node = replace(node, gate=None)
    outputs = [k for k, b in node.inputs if b.kind is not BindingKind.PARAM and b.kind is not BindingKind.CONST]
    if outputs and builder._sub_stack:
        raise PipelineDefinitionError(
            "a finally step reads parameters and constants only: this sub-pipeline parameter is bound to a "
            "step output of the calling pipeline, which no backend hands to a sub-workflow's failure node yet",
            pipeline=builder.name, step=node.name, port=outputs[0],
            hint="pass the finally step a parameter of the outermost pipeline or a constant instead",
        )
    for port in outputs:  # an output of the body (recorded before this call): None if it never existed
        if node.bindings[port].kind is not BindingKind.OUTPUT:
            raise PipelineDefinitionError(
                "a finally step reads parameters, constants and outputs of the body's steps", pipeline=builder.name,
                step=node.name, port=port)
        _check_optional(builder, node.name, port, step.spec.input(port).type)
    if node.run_if is not None:  # all_done by nature: the rule only let it read a block's Optional outputs
        from dataclasses import replace

        node = replace(node, run_if=None)
    if getattr(builder, "finally_node", None) is not None:
        builder.finally_pending = node  # a second one: fine if it scopes a block (`with`), checked at the end
    else:
        builder.finally_node = node
    return _FinallyCall(builder, node)
