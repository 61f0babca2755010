"""The lowered plan of a small pipeline (docs/architecture.md, "The lowered plan"): a
sub-pipeline call with a map inside it, an il.when/il.otherwise chain with a branch value,
and an il.finally_ block.

    python docs/examples/plan_example.py      # prints the plan every backend renders
"""

from __future__ import annotations

import interlock as il
from interlock.core.backend.plan import lower


@il.step
def split(text: str) -> list[str]:
    return text.split()


@il.step
def size(word: str) -> int:
    return len(word)


@il.step
def total(xs: list[int]) -> int:
    return sum(xs)


@il.step
def label(name: str, n: int) -> str:
    return f"{name}:{n}"


@il.step
def report(status: il.RunStatus) -> None:
    print("published:", status.status)


@il.pipeline(name="count-words")
def count_words(text: str) -> int:
    return total(xs=il.map(size, over=split(text=text)))


@il.pipeline(name="plan-example")
def plan_example(text: str = "a bb ccc", limit: int = 4):
    n = count_words(text=text)
    with il.when(n > limit):
        high = label.named("high")(name="long", n=n)
    with il.otherwise():
        low = label.named("low")(name="short", n=n)
    with il.finally_(report):
        label.named("publish")(name=il.branch_value(high, low), n=n)


if __name__ == "__main__":
    print(lower(il.spec(plan_example)).describe())
