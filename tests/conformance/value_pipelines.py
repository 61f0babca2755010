"""Pipelines whose steps return and consume untyped ``dict``/``list`` values: ints, floats,
bools, None and nested dicts whose keys are not in sorted order. Every backend must hand the
next step (and the caller) exactly what the producing step returned."""

from __future__ import annotations

from typing import NamedTuple

import interlock as il

# Keys deliberately out of sorted order, at every level.
RECORD = {
    "zeta": 1,
    "alpha": 2.0,
    "mid": True,
    "nothing": None,
    "nested": {"b": 10, "a": [1, 2.5, False, None, "s"], "c": {"y": 0, "x": -3}},
    "big": 2**53 + 1,
    "whole_float": 3.0,
}
ITEMS = [3, 1.0, True, None, "x", {"z": 1, "a": 2.0}, [0, 0.0, False]]


def shape(value: object) -> object:
    """A value with every leaf's type and every dict's key order spelled out."""
    if isinstance(value, dict):
        return ["dict", [[k, shape(v)] for k, v in value.items()]]
    if isinstance(value, list):
        return ["list", [shape(v) for v in value]]
    return [type(value).__name__, value]


@il.step
def make_record(scale: int) -> dict:
    return {**RECORD, "scaled": scale * 2}


@il.step
def make_items(scale: int) -> list:
    return [*ITEMS, scale]


@il.step
def make_typed(scale: int) -> dict[str, int]:
    return {"z": scale, "a": 2, "m": 3}


class Seen(NamedTuple):
    record: dict
    items: list
    shapes: list
    typed: str


@il.step
def inspect(record: dict, items: list, typed: dict[str, int]) -> Seen:
    # What the consumer received, with types and key order, as plain strings: these survive
    # any backend untouched, so they witness what arrived here.
    return Seen(record, items, [repr(shape(record)), repr(shape(items))], repr(shape(typed)))


@il.pipeline(name="conf-untyped-values")
def untyped_values(scale: int = 4):
    record = make_record(scale=scale)
    items = make_items(scale=scale)
    seen = inspect(record=record, items=items, typed=make_typed(scale=scale))
    return record, items, seen.record, seen.items, seen.shapes, seen.typed


@il.step
def scale_weights(weights: dict[str, int], scale: int) -> dict[str, int]:
    return {**weights, "scaled": scale * 2}


@il.step
def witness(weights: dict[str, int]) -> str:
    return repr(shape(weights))


@il.step
def nested_typed(scale: int) -> list[dict[str, int | None]]:
    return [{"b": 1, "a": None}, {"z": scale // 2}]


@il.pipeline(name="conf-typed-values")
def typed_values(weights: dict[str, int] = {"zeta": 3, "alpha": 1, "mid": 2}, scale: int = 4):  # noqa: B006
    scaled = scale_weights(weights=weights, scale=scale)
    return scaled, witness(weights=scaled), nested_typed(scale=scale), witness.named("param")(weights=weights)
