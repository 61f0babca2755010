"""Port of Flyte's nested conditions example (flytesnacks examples/advanced_composition,
`nested_conditions`): inside the [0.1, 1.0) branch a nested conditional computes the
circumference below 0.5, the area in (0.5, 0.7), and fails the run otherwise
("radius between 0.7 and 1.0 is not supported"); [1.0, 10.0] computes the area; anything
else fails (the outer blocks are independent il.when blocks: their ranges are disjoint, and
KFP cannot render a chain whose conditions are conjunctions). With radius=0.95 the nested guard must fail the run on every backend.

    python docs/examples/flyte_nested_conditions.py
"""

from __future__ import annotations

import math

import interlock as il
from interlock.core.dsl.branches import branch_value, elif_, otherwise


@il.step
def circumference(radius: float) -> float:
    return round(2 * math.pi * radius, 6)


@il.step
def area(radius: float) -> float:
    return round(math.pi * radius * radius, 6)


@il.step
def reject(radius: float, reason: str) -> float:
    raise ValueError(f"radius {radius}: {reason}")


@il.step
def report(value: float) -> str:
    return f"{value:.4f}"


@il.pipeline(name="flyte-nested-conditions")
def nested_conditions(radius: float = 0.4):
    with il.when((radius >= 0.1) & (radius < 1.0)):
        with il.when(radius < 0.5):
            c = circumference(radius=radius)
        with elif_(radius < 0.7):
            a = area.named("inner-area")(radius=radius)
        with otherwise():
            r = reject.named("not-supported")(radius=radius, reason="radius between 0.7 and 1.0 is not supported")
        report.named("inner-report")(value=branch_value(c, a, r))
    with il.when((radius >= 1.0) & (radius <= 10.0)):
        report.named("outer-report")(value=area.named("outer-area")(radius=radius))
    # Flyte's outer .else_().fail(...): KFP has no `|`, so one block per side of the range.
    with il.when(radius < 0.1):
        reject.named("below-range")(radius=radius, reason="the input must be within the range of 0 to 10")
    with il.when(radius > 10.0):
        reject.named("above-range")(radius=radius, reason="the input must be within the range of 0 to 10")


if __name__ == "__main__":
    # Import this file as a module: kfp-local's components import the pipeline by module name.
    import flyte_nested_conditions as example
    from _compare import same_everywhere

    for r in (0.4, 0.6, 0.95, 5.0, 20.0):
        print(r, same_everywhere(example.nested_conditions, radius=r))
