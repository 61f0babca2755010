"""Defaults written the way published samples write them: an int for a float (``a: float = 1``,
the KFP retry sample's signature), in a pipeline parameter and in a step input left unbound."""

from __future__ import annotations

import interlock as il


@il.step
def scale(x: float, factor: float = 2) -> float:
    return x * factor


@il.step
def total(xs: list[float]) -> float:
    return sum(xs)


@il.pipeline(name="int-defaults")
def int_defaults(a: float = 1, weights: list[float] = (1, 2)):  # type: ignore[assignment]
    return scale(x=a), total(xs=weights)
