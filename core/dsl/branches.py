"""Branches with values: ``il.elif_``, ``il.otherwise`` and ``il.branch_value``.

    with il.when(flip == "heads"):
        a = heads_step()
    with il.elif_(flip == "tails"):
        b = tails_step()
    with il.otherwise():
        c = edge_step()
    result = il.branch_value(a, b, c)     # the value of whichever branch ran

The blocks are sibling ``with`` statements, as KFP writes ``dsl.If``/``dsl.Elif``/``dsl.Else``
and reads the result with ``dsl.OneOf``: no handle to thread through, and each ``with`` reads
like Python's ``if``/``elif``/``else``. An ``il.elif_``/``il.otherwise`` attaches to the block
just before it in the same scope; nothing may be recorded in between (compute its condition
first), so that each backend can render the chain as one native construct (KFP If/Elif/Else,
one Flyte ``conditional(...).if_().elif_().else_()``).

In the spec each follower block is an ordinary gate whose ``expr`` is its *effective*
condition (every earlier condition false, its own true), so whatever evaluates gates gets
the right answer; ``follows`` and ``own`` keep the chain for native rendering.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.chains import option_gate
from interlock.core.model.conditions import Cond, Op, condition_of
from interlock.core.model.pipeline_spec import Gate
from interlock.core.model.spec import Binding, BindingKind

if TYPE_CHECKING:
    from interlock.core.dsl.build import Builder, Promise


def _builder(what: str) -> Builder:
    from interlock.core.dsl.build import current_builder

    b = current_builder()
    if b is None:
        raise PipelineDefinitionError(f"il.{what} is only meaningful inside an @il.pipeline function")
    return b


def _previous(builder: Builder, what: str) -> Gate:
    last = builder.last_block
    scope = builder._gate_stack[-1] if builder._gate_stack else None
    prev = next((g for g in builder.gates if last and g.id == last[0]), None)
    ok = (last is not None and prev is not None and prev.parent == scope
          and last[1] == len(builder.nodes) and last[2] == len(builder.gates))
    if not ok or prev is None:
        raise PipelineDefinitionError(
            f"il.{what} must directly follow an il.when or il.elif_ block in the same scope",
            pipeline=builder.name,
            hint="compute the condition before the il.when block; nothing may be recorded between the blocks",
        )
    if prev.follows is not None and prev.own is None:
        raise PipelineDefinitionError(f"il.{what} cannot follow il.otherwise", pipeline=builder.name)
    return prev


def chain_conditions(builder_gates: list[Gate], last: Gate) -> list[Cond]:
    """The own conditions of a chain up to and including ``last``, first block first."""
    by_id = {g.id: g for g in builder_gates}
    out: list[Cond] = []
    g: Gate | None = last
    while g is not None:
        out.append(g.own if g.follows is not None else condition_of(g))
        g = by_id.get(g.follows) if g.follows else None
    return out[::-1]


def _follower(builder: Builder, what: str, own: Cond | None) -> contextlib.AbstractContextManager[None]:
    from interlock.core.dsl.build import author_site

    prev = _previous(builder, what)
    earlier = chain_conditions(builder.gates, prev)
    terms = [Cond(Op.NOT, (), (c,)) for c in earlier] + ([own] if own is not None else [])
    effective = terms[0] if len(terms) == 1 else Cond(Op.AND, (), tuple(terms))
    gate = Gate(
        id=f"gate-{len(builder.gates) + 1}", condition=Binding.of_const(None), parent=prev.parent,
        expr=effective, follows=prev.id, own=own, source=author_site(),
    )
    return builder.block(gate, own.describe() if own is not None else "otherwise")


def elif_(condition: Any) -> contextlib.AbstractContextManager[None]:
    """Run the block when every earlier block of the chain was skipped and ``condition`` holds."""
    builder = _builder("elif_")
    _previous(builder, "elif_")
    cond, _ = builder.condition_for(condition)
    return _follower(builder, "elif_", cond)


def otherwise() -> contextlib.AbstractContextManager[None]:
    """Run the block when every earlier block of the chain was skipped."""
    return _follower(_builder("otherwise"), "otherwise", None)


def branch_value(*values: Promise) -> Promise:
    """The value of whichever branch ran: one output per block of an il.when/il.elif_/il.otherwise chain.

    Every block of the chain assigns one, the chain ends with il.otherwise (so a value always
    exists), and all have the same type. KFP renders it as ``dsl.OneOf``, Flyte as the
    conditional's output, the local backend takes the branch that ran.
    """
    from interlock.core.dsl.build import Promise

    builder = _builder("branch_value")
    if not values or not all(isinstance(v, Promise) and v._builder is builder for v in values):
        raise PipelineDefinitionError(
            "il.branch_value takes one step output per branch, e.g. il.branch_value(a, b, c)", pipeline=builder.name,
        )
    from interlock.core.dsl.attempt import attempt_pair

    pair = attempt_pair(builder, values)  # made in an il.attempt() block or in its fallback
    if pair is not None:
        return Promise(builder, pair, values[0].type)
    gates: list[str | None] = []
    by_id = {g.id: g for g in builder.gates}
    for v in values:
        b = v.binding
        if (b.kind is not BindingKind.OUTPUT or b.field) and b.kind is not BindingKind.ONE_OF:
            raise PipelineDefinitionError(
                f"il.branch_value: {v.describe()} is not a whole step output", pipeline=builder.name,
                hint="pass the output of a step called directly inside the branch, or the branch value of a "
                "chain inside it",
            )
        # A chain's value made inside the block (a nested chain) is that block's value too.
        gates.append(option_gate(b, builder._node_gate.get, lambda g: by_id[g].parent if g in by_id else None))
    last = by_id.get(gates[-1] or "")
    chain_ids: list[str] = []
    g = last
    while g is not None:
        chain_ids.append(g.id)
        g = by_id.get(g.follows) if g.follows else None
    chain_ids.reverse()
    if last is None or gates != chain_ids:
        described = ", ".join(v.describe() for v in values)
        raise PipelineDefinitionError(
            f"il.branch_value({described}): pass exactly one output produced directly in each block of one "
            "il.when/il.elif_/il.otherwise chain, in the order of the blocks",
            pipeline=builder.name,
            hint="a value assigned in only some branches has no value when another branch runs: assign it in all",
        )
    if last.follows is None or last.own is not None:
        raise PipelineDefinitionError(
            f"il.branch_value({', '.join(v.describe() for v in values)}): the chain has no il.otherwise block, "
            "so no branch may run and the value would not exist",
            pipeline=builder.name, hint="end the chain with `with il.otherwise():` and assign the value there too",
        )
    t = values[0].type
    for v in values[1:]:
        if v.type != t:
            raise PipelineDefinitionError(
                f"il.branch_value: {v.describe()} is {v.type.describe()}, but {values[0].describe()} is {t.describe()}",
                pipeline=builder.name, hint="every branch must produce the same type",
            )
    return Promise(builder, Binding.one_of(tuple(v.binding for v in values)), t)






def check_value_in_scope(builder: Builder, b: Binding, node: str, port: str) -> None:
    """A branch value exists where its chain is: in the chain's scope and blocks inside it."""
    by_id = {g.id: g for g in builder.gates}
    first = option_gate(b.options[0], builder._node_gate.get, lambda g: by_id[g].parent if g in by_id else None)
    scope = next((g.parent for g in builder.gates if g.id == first), None)
    if scope is not None and scope not in builder._gate_stack:
        raise PipelineDefinitionError(
            f"{b.describe()} belongs to a chain inside an il.when block and may not exist here",
            pipeline=builder.name, step=node, port=port, hint="use it inside the same il.when block",
        )






