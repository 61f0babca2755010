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

from interlock.core.model.pipeline_spec import Gate
from interlock.core.model.spec import Binding, BindingKind


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


def gate_label(gate: Gate) -> str:
    """`n > 5`, or for a chain block `elif n > 2 (after gate-1)` / `otherwise (after gate-2)`."""
    follows = getattr(gate, "follows", None)
    if follows is None:
        return condition_of(gate).describe()
    own = getattr(gate, "own", None)
    return f"{f'elif {own.describe()}' if own is not None else 'otherwise'} (after {follows})"


def decide(gate: Gate, value_of: Callable[[Binding], Any]) -> bool | None:
    """The gate's condition, or None when a value it reads is not there (not produced)."""
    try:
        return condition_of(gate).evaluate(value_of)
    except KeyError:
        return None












