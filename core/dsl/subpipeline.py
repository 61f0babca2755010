"""Sub-pipelines: an ``@il.pipeline`` called inside another pipeline's body.

    @il.pipeline(name="prep")
    def prep(path: str, rows: int = 10) -> ...:
        raw = load(path=path)
        return clean(raw=raw, rows=rows)

    @il.pipeline(name="train")
    def train(path: str = "s3://...") -> ...:
        data = prep(path=path)                 # typed like a step call
        other = prep.named("prep-b")(path="x")  # the same sub-pipeline again, another call name
        return fit(data=data)

The call is typed like a step: its parameters are its inputs (unknown, missing and
mistyped arguments are refused, naming the outer pipeline, the sub-pipeline and the port),
and what its body returns are its outputs. Its body is recorded into the outer pipeline's
graph, each node under a qualified name ``<call>.<node>`` (``prep.load``; nested two deep
``outer.inner.step``), so every backend runs, caches, retries and reports the inner steps as
steps, and statuses and receipts name them unambiguously. The call itself is kept as a
:class:`SubCall` in ``PipelineSpec.subs``: adapters render it natively (a Flyte
sub-workflow, a KFP pipeline-as-component: a nested DAG).

The names in the qualified form obey the node-name rule segment by segment (``core/names``):
a dot separates them, as Flyte and KFP separate a sub-workflow or nested DAG from its nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.subcalls import SEP, SubCall

if TYPE_CHECKING:
    from interlock.core.dsl.build import Builder
    from interlock.core.dsl.pipeline import Pipeline
    from interlock.core.model.fanout import MapSpec


def _bare(exc: PipelineDefinitionError) -> str:
    """An error's message without its "pipeline ..., step ..., port ...: " prefix (re-raised with a wider one)."""
    where = ", ".join(f"{k} {v!r}" for k, v in (("pipeline", exc.pipeline), ("step", exc.step), ("port", exc.port)) if v)
    msg = exc.message
    return msg[len(where) + 2:] if where and msg.startswith(where + ": ") else msg


def call_subpipeline(sub: Pipeline, builder: Builder, kwargs: dict[str, Any], call_name: str | None,
                     mapped: MapSpec | None = None) -> Any:
    """Record ``sub``'s body into ``builder`` as one call; return its outputs like a step's.
    ``mapped``: il.map over the sub-pipeline (core/dsl/submap.py): its item parameters are bound
    to lists, the body reads one element of each, and each output is a list."""
    from interlock.core.dsl.build import Promise
    from interlock.core.dsl.submap import MappedCall

    active = builder.__dict__.setdefault("_sub_fns", [])  # the sub-pipeline bodies being recorded
    if sub.fn in active or sub.name == builder.name:
        raise PipelineDefinitionError(
            f"sub-pipeline {sub.name!r} calls itself (directly or through another sub-pipeline)",
            pipeline=builder.name, hint="a pipeline's graph is fixed when it is built: recursion has no end",
        )
    prefix = builder.sub_prefix()
    name = prefix + call_name if call_name else builder._fresh_name(prefix + sub.name)
    taken = {n.name for n in builder.nodes} | {s.name for s in builder.subs}
    if name in taken:
        raise PipelineDefinitionError(
            "duplicate node name", pipeline=builder.name, step=name,
            hint=f"call it as {sub.fn.__name__}.named('another-name')(...) the second time",
        )
    if any(n.name.startswith(name + SEP) for n in builder.nodes):
        raise PipelineDefinitionError("a sub-pipeline call's name is already used", pipeline=builder.name, step=name)
    where = f"sub-pipeline {sub.name!r} (called as {name!r})"
    params = sub._params()
    known = {p.name for p in params}
    # `after=` orders the whole call after other work, without data (KFP .after(), Flyte >>); a
    # parameter named "after" wins, as for a step.
    after = builder._after_nodes(kwargs.pop("after", None), name) if "after" not in known else ()
    unknown = [k for k in kwargs if k not in known]
    if unknown:
        raise PipelineDefinitionError(
            f"{where}: unknown argument(s) {unknown}; its parameters are {sorted(known)}",
            pipeline=builder.name, step=name, port=unknown[0],
        )
    inputs: list[tuple[str, Binding]] = []
    args: dict[str, Any] = {}
    fan = MappedCall(builder, name, where, mapped) if mapped is not None else None
    for p in params:
        if fan is not None and p.name in fan.map.takes:  # the list; the body reads its element
            item_b, args[p.name] = fan.bind_item(p, kwargs.get(p.name))
            if item_b is not None:
                inputs.append((p.name, item_b))
            continue
        if p.name not in kwargs:
            if not p.has_default:
                raise PipelineDefinitionError(
                    f"{where}: missing required parameter of type {p.type.describe()}",
                    pipeline=builder.name, step=name, port=p.name,
                )
            b = Binding.of_const(p.default)
        else:
            try:
                b = builder._bind(kwargs[p.name], name, p.name, p.type)
            except PipelineDefinitionError as exc:
                raise PipelineDefinitionError(
                    f"{where}: {_bare(exc)}", pipeline=builder.name, step=name, port=p.name, hint=exc.hint,
                ) from exc
        inputs.append((p.name, b))
        args[p.name] = Promise(builder, b, p.type)

    before_nodes, before_gates = len(builder.nodes), len(builder.gates)
    gate = builder._gate_stack[-1] if builder._gate_stack else None
    parent = builder._sub_stack[-1] if builder._sub_stack else None
    # il.finally_ in the sub-pipeline's body is scoped to this call: the caller's own finally
    # state is set aside while the body is recorded (core/dsl/finally_.py), and so are its gates.
    saved = builder.finally_node, builder.finally_pending
    builder.finally_node, builder.finally_pending = None, None
    builder.sub_gate_depths.append(len(builder._gate_stack))
    builder._sub_stack.append(name)
    active.append(sub.fn)
    collected = len(builder.wiring_errors)
    try:
        returned = sub.fn(**args)
        # The body's wiring mistakes, collected rather than raised, say where as a raised one does.
        for i in range(collected, len(builder.wiring_errors)):
            e = builder.wiring_errors[i]
            if not _bare(e).startswith("in sub-pipeline"):
                builder.wiring_errors[i] = PipelineDefinitionError(
                    f"in {where}: {_bare(e)}", pipeline=builder.name, step=e.step, port=e.port, hint=e.hint,
                )
        from interlock.core.dsl.finally_ import call_finally

        own_finally = call_finally(builder)
    except PipelineDefinitionError as exc:
        if _bare(exc).startswith("in sub-pipeline"):
            raise  # a deeper call already said where
        raise PipelineDefinitionError(
            f"in {where}: {_bare(exc)}", pipeline=builder.name, step=exc.step, port=exc.port, hint=exc.hint,
        ) from exc
    finally:
        builder._sub_stack.pop()
        builder.sub_gate_depths.pop()
        active.pop()
        builder.finally_node, builder.finally_pending = saved
    nodes = tuple(n.name for n in builder.nodes[before_nodes:])
    if not nodes:
        raise PipelineDefinitionError(f"{where} records no steps", pipeline=builder.name, step=name)
    if fan is not None:
        fan.close(before_nodes, own_finally is not None)
    try:
        outs, types_ = sub._outputs(builder, returned)
    except PipelineDefinitionError as exc:
        raise PipelineDefinitionError(f"in {where}: {_bare(exc)}", pipeline=builder.name, hint=exc.hint) from exc
    if own_finally is not None:  # the call's finally: a block over every node of the call
        from interlock.core.model.pipeline_spec import FinallyBlock

        builder.finally_blocks.append(FinallyBlock(own_finally, nodes))
    builder.subs.append(SubCall(
        name=name, pipeline=sub.name, ref=sub.ref, parent=parent, gate=gate, inputs=tuple(inputs),
        outputs=tuple(outs), nodes=nodes, gates=tuple(g.id for g in builder.gates[before_gates:]),
        finally_=own_finally.name if own_finally is not None else None, after=after,
        map=mapped, items=tuple(fan.items) if fan is not None else (),
    ))
    # Nothing may attach to a block of the sub-pipeline from outside it (il.elif_ after the call).
    builder.last_block = None
    if fan is not None:
        types_ = [(k, fan.lift(t)) for k, t in types_]
    return _promises(builder, returned, outs, types_, nodes)


def _promises(builder: Builder, returned: Any, outs: list[tuple[str, Binding]], types_: list[tuple[str, Any]],
              nodes: tuple[str, ...]) -> Any:
    from interlock.core.dsl.build import CallHandle, Outputs, Promise

    if not outs:  # a call with no outputs: `after=` it waits for the whole call
        return CallHandle(nodes)
    promises = [Promise(builder, b, t) for (_, b), (_, t) in zip(outs, types_, strict=True)]
    if len(outs) == 1 and outs[0][0] == "o0":
        return promises[0]
    return Outputs(promises, [k for k, _ in outs])


def refuse_constant_condition(builder: Builder, cond: Any) -> None:
    """A condition term with no run-time operand: a sub-pipeline parameter the caller bound to a
    constant (or left at its default), compared with a constant. No backend renders a condition
    known while the pipeline is built (KFP refuses ``dsl.If(True)``; Flyte compares promises)."""
    from interlock.core.model.conditions import COMPARISONS, Op

    def terms(c: Any) -> list[Any]:
        if c.op is Op.REF or c.op in COMPARISONS:
            return [c]
        return [t for x in c.terms for t in terms(x)]

    for t in terms(cond):
        if all(b.kind is BindingKind.CONST for b in t.operands):
            values = ", ".join(repr(b.value) for b in t.operands)
            raise PipelineDefinitionError(
                f"il.when({t.describe()}) in sub-pipeline call {builder._sub_stack[-1]!r} compares only values known "
                f"while the pipeline is built ({values}): a parameter of the sub-pipeline that this call binds to a "
                "constant (or leaves at its default) has no run-time value to test",
                pipeline=builder.name, step=builder._sub_stack[-1],
                hint="declare the value as a parameter of the calling pipeline and pass it on (e.g. "
                "`def outer(limit: int = 5)` ... `describe(text=t, limit=limit)`), or pass a step output",
            )


























