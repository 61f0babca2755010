"""Pipelines for maps over zipped lists (tests/conformance/test_map_zip.py)."""

from __future__ import annotations

import interlock as il
from conformance.fanout_pipelines import maybe_double, plus  # the same steps over zipped lists


@il.step
def quantities(n: int) -> list[int]:
    return list(range(1, n + 1))


@il.step
def shipping_fee(base: float) -> float:
    return base * 2


@il.step
def line_total(quantity: int, price: float, shipping: float, note: str = "-") -> float:
    if quantity < 0:
        raise ValueError(f"bad config: quantity {quantity} is negative")
    return quantity * price + shipping


@il.step
def order_total(lines: list[float]) -> float:
    return round(sum(lines), 6)


@il.step
def kept_lines(lines: list[float | None]) -> list[float | None]:
    return list(lines)


@il.pipeline(name="zip-orders")
def orders(prices: list[float] = [1.5, 2.0, 4.0], base: float = 0.5):  # noqa: B006 - recorded, never mutated
    # One list a step output, one a parameter, and a broadcast step output (kfp-local's loop bug).
    lines = il.map(line_total, over=il.zip(quantity=quantities(n=3), price=prices), shipping=shipping_fee(base=base))
    return order_total(lines=lines), lines


@il.pipeline(name="zip-orders-tolerant")
def orders_tolerant(qs: list[int] = [1, -2, 3, 4], prices: list[float] = [1.0, 1.0, 2.0, 0.5]):  # noqa: B006
    return kept_lines(lines=il.map(line_total, over=il.zip(quantity=qs, price=prices), shipping=0.0, tolerate=0.5))


# -- a loop body of several steps, written as the refusal of il.map over a sub-pipeline says ----
@il.step
def prepare(x: int) -> int:
    return x * 10


@il.step
def fit(data: int, lr: float) -> float:
    return data * lr


@il.pipeline(name="zip-trial")
def trial(x: int, lr: float = 0.1):
    return fit(data=prepare(x=x), lr=lr)


@il.pipeline(name="zip-body-chained")
def body_chained(xs: list[int] = [1, 2, 3], lrs: list[float] = [0.5, 0.25, 0.125]):  # noqa: B006
    prepared = il.map(prepare, over=xs)
    return il.map(fit, over=il.zip(data=prepared, lr=lrs))


@il.pipeline(name="zip-in-sub")
def priced(qs: list[int], ps: list[float]):
    return order_total(lines=il.map(line_total, over=il.zip(quantity=qs, price=ps), shipping=1.0))


@il.pipeline(name="zip-in-sub-and-branch")
def in_sub_and_branch(qs: list[int] = [1, 2], ps: list[float] = [2.0, 3.0], go: bool = True):  # noqa: B006
    inside = priced(qs=qs, ps=ps)
    with il.when(go):
        order_total(lines=il.map(line_total, over=il.zip(quantity=qs, price=ps), shipping=0.0))
    return inside


@il.pipeline(name="zip-optional-lists")
def optional_lists(xs: list[int] = [1, 2, 3]):  # noqa: B006 - recorded, never mutated
    return il.map(plus, over=il.zip(a=xs, b=il.map(maybe_double, over=xs)))
