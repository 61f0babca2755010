"""Pipelines for maps over zipped lists (tests/conformance/test_map_zip.py)."""

from __future__ import annotations

import interlock as il


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
