"""Integer steps that the property tests wire together at random."""

from __future__ import annotations

import interlock as il


@il.step
def add(a: int, b: int) -> int:
    return a + b


@il.step
def neg(x: int) -> int:
    return -x


@il.step
def shift(x: int, by: int = 1) -> int:
    return x + by


@il.step
def is_positive(x: int) -> bool:
    return x > 0


@il.step
def show(x: int) -> str:
    return f"x={x}"
