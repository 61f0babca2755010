"""Port of the KFP v2 sample "condition" (samples/core/condition/condition.py in
kubeflow/pipelines): flip a coin; on heads draw a number in 0..9, on tails one in 10..19,
and print a different message depending on the number. Here the coin and the numbers come
from a seed so that every backend gives the same run; the branches are the same.

    python docs/examples/kfp_condition.py      # runs on local, flyte-local and kfp-local
"""

from __future__ import annotations

import random

import interlock as il

# il.otherwise and il.branch_value once they are exported from interlock
from interlock.core.dsl.branches import branch_value, otherwise


@il.step
def flip_coin(seed: int) -> str:
    return "heads" if random.Random(seed).randint(0, 1) == 0 else "tails"


@il.step
def random_num(low: int, high: int, seed: int) -> int:
    return random.Random(seed * 31 + low).randint(low, high)


@il.step
def print_msg(msg: str) -> str:
    print(msg)
    return msg


@il.pipeline(name="kfp-condition")
def condition(seed: int = 1):
    flip = flip_coin(seed=seed)
    with il.when(flip == "heads"):
        a = random_num.named("heads-num")(low=0, high=9, seed=seed)
        with il.when(a > 5):
            print_msg.named("heads-big")(msg="heads and the number is > 5")
        with otherwise():
            print_msg.named("heads-small")(msg="heads and the number is <= 5")
    with otherwise():
        b = random_num.named("tails-num")(low=10, high=19, seed=seed)
        with il.when(b > 15):
            print_msg.named("tails-big")(msg="tails and the number is > 15")
        with otherwise():
            print_msg.named("tails-small")(msg="tails and the number is <= 15")
    return flip, branch_value(a, b)


if __name__ == "__main__":
    # Import this file as a module: kfp-local's components import the pipeline by module name.
    import kfp_condition as example
    from _compare import same_everywhere

    for seed in (2, 4, 5, 7):  # heads > 5, heads <= 5, tails <= 15, tails > 15
        print(seed, same_everywhere(example.condition, seed=seed))
