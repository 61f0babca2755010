"""Port of Flyte's "conditions" example (flytesnacks examples/advanced_composition,
`shape_properties_with_multiple_branches`): for a radius in [0.1, 1.0) compute the circle's
circumference, in [1.0, 10.0] its area, and otherwise fail the run with a message.

Flyte writes `.if_((radius >= 0.1) & (radius < 1.0)) ... .elif_((radius >= 1.0) & (radius <= 10.0))`.
A KFP dsl.If/dsl.Elif of a chain takes one comparison (dsl.Elif negates each earlier
comparison on its own), so the ranges are written as ordered single comparisons, which
selects the same branch for every radius.

    python docs/examples/flyte_conditions.py
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
    raise ValueError(f"radius {radius}: {reason}")  # Flyte's .fail(...): the run fails


@il.pipeline(name="flyte-conditions")
def shape_properties(radius: float = 0.5):
    with il.when(radius < 0.1):
        low = reject.named("too-small")(radius=radius, reason="the input must be within the range of 0 to 10")
    with elif_(radius < 1.0):
        c = circumference(radius=radius)
    with elif_(radius <= 10.0):
        a = area(radius=radius)
    with otherwise():
        high = reject.named("too-big")(radius=radius, reason="the input must be within the range of 0 to 10")
    return branch_value(low, c, a, high)


if __name__ == "__main__":
    # Import this file as a module: kfp-local's components import the pipeline by module name.
    import flyte_conditions as example
    from _compare import same_everywhere

    for r in (0.5, 3.0, 11.0):
        print(r, same_everywhere(example.shape_properties, radius=r))
