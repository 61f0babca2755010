"""Conditions as an author writes them: ``promise > 5``, ``a & b``, ``~c`` inside a pipeline body.

Each builds a :class:`~interlock.core.model.conditions.Cond` (the expression tree the spec keeps),
type-checked against the promise it compares.
"""

from __future__ import annotations

from typing import Any

from interlock.core.model.conditions import Cond, Op
from interlock.core.model.spec import Binding, BindingKind


# -- build time --------------------------------------------------------------------------------
class Condition:
    """What ``promise > 5`` or ``a & b`` gives inside a pipeline body: pass it to ``il.when``."""

    def __init__(self, cond: Cond, pipeline: str, builder: Any):
        self.cond = cond
        self._pipeline = pipeline
        self._builder = builder

    def __and__(self, other: Any) -> Condition:
        return combine(Op.AND, self, other)

    def __rand__(self, other: Any) -> Condition:
        return combine(Op.AND, other, self)

    def __or__(self, other: Any) -> Condition:
        return combine(Op.OR, self, other)

    def __ror__(self, other: Any) -> Condition:
        return combine(Op.OR, other, self)

    def __invert__(self) -> Condition:
        return Condition(Cond(Op.NOT, (), (self.cond,)), self._pipeline, self._builder)

    def __bool__(self) -> bool:
        from interlock.core.base.errors import PipelineDefinitionError

        raise PipelineDefinitionError(
            f"the condition {self.cond.describe()} has no value while the pipeline is being built",
            pipeline=self._pipeline,
            hint="write `with il.when(<condition>):`; combine conditions with & | ~ (not `and`, `or`, `not`)",
        )

    def __repr__(self) -> str:
        return f"<condition {self.cond.describe()}>"


def as_cond(value: Any, pipeline: str) -> Cond:
    """A Condition, or a bool promise (output or parameter), as an expression."""
    from interlock.core.base.errors import PipelineDefinitionError
    from interlock.core.dsl.build import Promise
    from interlock.core.model.codecs import TypeKind

    if isinstance(value, Condition):
        return value.cond
    if isinstance(value, Promise):
        if value.type.kind is not TypeKind.BOOL or value.type.optional:
            raise PipelineDefinitionError(
                f"il.when needs a bool, but {value.describe()} is {value.type.describe()}",
                pipeline=pipeline,
                hint=f"compare it: e.g. il.when({_short(value)} == ...) or il.when({_short(value)} > ...)",
            )
        _not_a_branch_value(value, pipeline)
        return Cond.ref(value.binding)
    raise PipelineDefinitionError(
        f"{value!r} ({type(value).__name__}) is a plain Python value: it is known while the pipeline is "
        "built, so it cannot decide anything at run time",
        pipeline=pipeline,
        hint="compare a step output or a pipeline parameter instead, e.g. `with il.when(flip == \"heads\"):` "
        "where flip = flip_coin(); for a value known now, use a Python `if` around the steps",
    )


def combine(op: Op, left: Any, right: Any) -> Condition:
    builder = left._builder if isinstance(left, Condition) else right._builder
    pipeline = builder.name
    terms: list[Cond] = []
    for side in (left, right):
        c = as_cond(side, pipeline)
        terms.extend(c.terms if c.op is op else (c,))  # flatten a & b & c
    return Condition(Cond(op, (), tuple(terms)), pipeline, builder)


def compare(op: Op, promise: Any, other: Any) -> Condition:
    """``promise <op> other`` at build time, type-checked; a promise always comes first."""
    from interlock.core.base.errors import PipelineDefinitionError
    from interlock.core.dsl.build import Promise
    from interlock.core.model.codecs import TypeKind, value_matches

    pipeline = promise._builder.name
    scalar = {TypeKind.INT, TypeKind.FLOAT, TypeKind.STR, TypeKind.BOOL}
    numeric = {TypeKind.INT, TypeKind.FLOAT}

    def check(p: Any) -> None:
        _not_a_branch_value(p, pipeline)
        if p.type.kind not in scalar or p.type.optional:
            raise PipelineDefinitionError(
                f"cannot compare {p.describe()} of type {p.type.describe()} in a condition",
                pipeline=pipeline, hint="conditions compare int, float, str or bool values; compute a flag in a step",
            )
        if p.binding.field:
            raise PipelineDefinitionError(
                f"a condition cannot compare {p.describe()}, a field of a dataclass output",
                pipeline=pipeline, hint="return the value as its own output (a NamedTuple field) and compare that",
            )
        if op not in (Op.EQ, Op.NE) and p.type.kind not in numeric:
            raise PipelineDefinitionError(
                f"`{op.value}` needs numbers, but {p.describe()} is {p.type.describe()}",
                pipeline=pipeline, hint="compare strings and bools with == or !=",
            )

    check(promise)
    if isinstance(other, Promise):
        check(other)
        if (promise.type.kind in numeric) != (other.type.kind in numeric) or (
            promise.type.kind not in numeric and promise.type.kind is not other.type.kind
        ):
            raise PipelineDefinitionError(
                f"cannot compare {promise.describe()} ({promise.type.describe()}) with "
                f"{other.describe()} ({other.type.describe()})", pipeline=pipeline,
            )
        right = other.binding
    elif isinstance(other, Condition):
        raise PipelineDefinitionError("cannot compare a value with a condition", pipeline=pipeline,
                                      hint="wrap each comparison in parentheses: (a > 1) & (b == 'x')")
    else:
        ok = value_matches(other, promise.type) or (
            promise.type.kind is TypeKind.FLOAT and isinstance(other, int) and not isinstance(other, bool))
        if not ok or other is None:
            raise PipelineDefinitionError(
                f"cannot compare {promise.describe()} ({promise.type.describe()}) with {other!r}",
                pipeline=pipeline, hint=f"compare it with a {promise.type.describe()} constant",
            )
        right = Binding.of_const(other)
    return Condition(Cond(op, (promise.binding, right)), pipeline, promise._builder)


def _short(p: Any) -> str:
    b = p.binding
    return b.param if b.param else (b.port if b.port != "o0" else b.node) or "value"


def _not_a_branch_value(p: Any, pipeline: str) -> None:
    from interlock.core.base.errors import PipelineDefinitionError

    if p.binding.kind is BindingKind.ONE_OF:
        # KFP cannot put a dsl.OneOf in a dsl.If condition; refuse everywhere, not only there.
        raise PipelineDefinitionError(
            f"a condition cannot read {p.describe()} (an il.branch_value)", pipeline=pipeline,
            hint="pass the value to a step that returns the flag or the number to compare, and use that output",
        )
