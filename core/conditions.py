"""Conditions of ``il.when`` blocks: a small expression tree over step outputs and parameters.

``il.when(n > 5)``, ``il.when((flip == "heads") & ~skip)``: comparing a promise builds a
``Cond`` instead of a bool. The tree is plain data in the spec (JSON round trip), evaluated
by the local backends, and rendered by each adapter into its native condition (a Flyte
``conditional(...).if_(...)`` expression, a KFP ``dsl.If`` condition): never an extra task.

Leaves are bindings (an output, a parameter, a constant). ``REF`` is a bool operand used as
is; the comparisons take two operands; ``AND``/``OR`` take two or more terms, ``NOT`` one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .spec import Binding, BindingKind, Gate


class Op(StrEnum):
    REF = "ref"
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    AND = "and"
    OR = "or"
    NOT = "not"


COMPARISONS = {
    Op.EQ: operator.eq, Op.NE: operator.ne, Op.LT: operator.lt,
    Op.LE: operator.le, Op.GT: operator.gt, Op.GE: operator.ge,
}
# Swapping operands: `5 < n` is recorded as `n > 5`, so an output or parameter comes first.
MIRRORED = {Op.EQ: Op.EQ, Op.NE: Op.NE, Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}
NEGATED = {Op.EQ: Op.NE, Op.NE: Op.EQ, Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT}


@dataclass(frozen=True)
class Cond:
    op: Op
    operands: tuple[Binding, ...] = ()  # REF: one; comparisons: left, right
    terms: tuple[Cond, ...] = ()  # AND/OR: two or more; NOT: one

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", Op(self.op))

    @staticmethod
    def ref(b: Binding) -> Cond:
        return Cond(Op.REF, (b,))

    def bindings(self) -> list[Binding]:
        """Every output or parameter the condition reads, in order, without repeats."""
        out: list[Binding] = []
        for b in self.operands:
            if b.kind is not BindingKind.CONST and b not in out:
                out.append(b)
        for t in self.terms:
            out.extend(b for b in t.bindings() if b not in out)
        return out

    def evaluate(self, value_of: Callable[[Binding], Any]) -> bool:
        if self.op is Op.REF:
            return bool(value_of(self.operands[0]))
        if self.op in COMPARISONS:
            left, right = (value_of(b) for b in self.operands)
            return bool(COMPARISONS[self.op](left, right))
        if self.op is Op.NOT:
            return not self.terms[0].evaluate(value_of)
        results = (t.evaluate(value_of) for t in self.terms)
        return all(results) if self.op is Op.AND else any(results)

    def without_not(self) -> Cond:
        """The same condition with NOT pushed down to the leaves (De Morgan; comparisons flip).

        Flyte's expressions have no negation; KFP's have none either: both get this form.
        A negated bool operand stays ``NOT(REF)``: adapters compare it with False.
        """
        if self.op is not Op.NOT:
            return Cond(self.op, self.operands, tuple(t.without_not() for t in self.terms))
        inner = self.terms[0]
        if inner.op is Op.NOT:
            return inner.terms[0].without_not()
        if inner.op in NEGATED:
            return Cond(NEGATED[inner.op], inner.operands)
        if inner.op in (Op.AND, Op.OR):
            flipped = Op.OR if inner.op is Op.AND else Op.AND
            return Cond(flipped, (), tuple(Cond(Op.NOT, (), (t,)).without_not() for t in inner.terms))
        return self  # NOT(REF)

    def describe(self) -> str:
        if self.op is Op.REF:
            return _operand(self.operands[0])
        if self.op in COMPARISONS:
            return f"{_operand(self.operands[0])} {self.op.value} {_operand(self.operands[1])}"
        if self.op is Op.NOT:
            return f"~({self.terms[0].describe()})"
        joiner = " & " if self.op is Op.AND else " | "
        parts = (f"({t.describe()})" if t.op in COMPARISONS else t.describe() for t in self.terms)
        return "(" + joiner.join(parts) + ")"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op.value}
        if self.operands:
            out["operands"] = [b.to_json() for b in self.operands]
        if self.terms:
            out["terms"] = [t.to_json() for t in self.terms]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Cond:
        return cls(
            Op(d["op"]),
            tuple(Binding.from_json(b) for b in d.get("operands", ())),
            tuple(cls.from_json(t) for t in d.get("terms", ())),
        )


def _operand(b: Binding) -> str:
    if b.kind is BindingKind.PARAM:
        return b.param or ""
    if b.kind is BindingKind.OUTPUT:
        return ".".join([b.node or "", b.port or "", *b.field])
    return repr(b.value)


def condition_of(gate: Gate) -> Cond:
    """A gate's condition as an expression (a plain ``il.when(flag)`` is ``REF(flag)``)."""
    expr = getattr(gate, "expr", None)
    return expr if expr is not None else Cond.ref(gate.condition)


def decide(gate: Gate, value_of: Callable[[Binding], Any]) -> bool | None:
    """The gate's condition, or None when a value it reads is not there (not produced)."""
    try:
        return condition_of(gate).evaluate(value_of)
    except KeyError:
        return None


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
        from .errors import PipelineDefinitionError

        raise PipelineDefinitionError(
            f"the condition {self.cond.describe()} has no value while the pipeline is being built",
            pipeline=self._pipeline,
            hint="write `with il.when(<condition>):`; combine conditions with & | ~ (not `and`, `or`, `not`)",
        )

    def __repr__(self) -> str:
        return f"<condition {self.cond.describe()}>"


def as_cond(value: Any, pipeline: str) -> Cond:
    """A Condition, or a bool promise (output or parameter), as an expression."""
    from .build import Promise
    from .errors import PipelineDefinitionError
    from .types import TypeKind

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
    from .build import Promise
    from .errors import PipelineDefinitionError
    from .spec import Binding
    from .types import TypeKind, value_matches

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
    from .errors import PipelineDefinitionError

    if p.binding.kind is BindingKind.ONE_OF:
        # KFP cannot put a dsl.OneOf in a dsl.If condition; refuse everywhere, not only there.
        raise PipelineDefinitionError(
            f"a condition cannot read {p.describe()} (an il.branch_value)", pipeline=pipeline,
            hint="pass the value to a step that returns the flag or the number to compare, and use that output",
        )
