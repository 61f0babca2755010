"""Pipelines with one output, a tuple and a NamedTuple, plus a gate whose block reads no data."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import interlock as il


@il.step
def double(x: int) -> int:
    return 2 * x


@il.step
def label(x: int, prefix: str = "n=") -> str:
    return f"{prefix}{x}"


class Stats(NamedTuple):
    total: int
    text: str
    ratio: float


@il.step
def stats(x: int, y: int) -> Stats:
    return Stats(x + y, f"{x}+{y}", x / y)


@il.step
def is_positive(x: int) -> bool:
    return x > 0


@il.step
def announce(msg: str) -> str:
    return msg.upper()


@il.pipeline(name="one-output")
def one_output(x: int = 2):
    return double(x=x)


@il.pipeline(name="tuple-output")
def tuple_output(x: int = 2):
    d = double(x=x)
    return d, label(x=d)


class Result(NamedTuple):
    doubled: int
    text: str


@il.pipeline(name="namedtuple-output")
def namedtuple_output(x: int = 2, y: int = 4):
    s = stats(x=x, y=y)
    return Result(doubled=double(x=s.total), text=s.text)


@il.pipeline(name="step-namedtuple-output")
def step_namedtuple_output(x: int = 3, y: int = 6):
    return stats(x=x, y=y)


@il.pipeline(name="late-gate")
def late_gate(x: int = 1):
    """The gated step reads only a constant, so only the gate orders it after the condition."""
    a = double(x=x)
    b = double(x=a)
    ok = is_positive(x=b)
    with il.when(ok):
        announce(msg="promoted")
    return b


@dataclasses.dataclass
class Verdict:
    ok: bool
    score: float


@il.step
def judge(x: int) -> Verdict:
    return Verdict(x > 0, x / 10)


@il.step
def halve(x: float) -> float:
    return x / 2


@il.pipeline(name="field-gates")
def field_gates(x: int = 5):
    """Gates on a dataclass bool field and on a NamedTuple field, one nested in the other."""
    v = judge(x=x)
    with il.when(v.ok):
        h = halve(x=v.score)
        d = il.champion_gate(challenger=metrics_of(score=h), metric="auc", margin=0.0)
        with il.when(d.promote):
            announce(msg="promoted")
    return v


@il.step
def metrics_of(score: float) -> il.Metrics:
    return il.Metrics(auc=score)


@il.step
def total(xs: list[int] = (1, 2)) -> int:  # type: ignore[assignment]  # a tuple default: JSON gives back a list
    return sum(xs)


@il.pipeline(name="tuple-defaults")
def tuple_defaults(ys: list[int] = (3, 4)):  # type: ignore[assignment]
    return total(xs=ys), total.named("total-default")()
