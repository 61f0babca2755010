"""Pipelines for ``il.map`` over a sub-pipeline (tests/conformance/test_map_subpipeline.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import interlock as il


@il.step
def make_lrs(n: int) -> list[float]:
    return [0.5 * (i + 1) for i in range(n)]


@il.step
def fit(lr: float, data: str) -> float:
    if lr < 0:
        raise ValueError(f"bad config: learning rate {lr} is negative")
    return lr * len(data)


@il.step
def score(model: float, bonus: float = 1.0) -> float:
    return model + bonus


@il.step
def best(scores: list[float]) -> float:
    return max(scores)


@il.step
def kept(scores: list[float | None]) -> list[float | None]:
    return list(scores)


@il.pipeline(name="trial")
def trial(lr: float, data: str) -> float:
    return score(model=fit(lr=lr, data=data))


@il.pipeline(name="submap-sweep")
def sweep(data: str = "abcd", n: int = 3):
    scores = il.map(trial, over=make_lrs(n=n), data=data)  # a step output's list, a broadcast parameter
    return best(scores=scores), scores


@il.pipeline(name="submap-tolerant")
def sweep_tolerant(lrs: list[float] = [1.0, -1.0, 2.0, 0.5]):  # noqa: B006 - recorded, never mutated
    scores = il.map(trial, over=lrs, data="ab", tolerate=1)
    return kept(scores=scores)


@il.pipeline(name="submap-strict")
def sweep_strict(lrs: list[float] = [1.0, -1.0, 2.0]):  # noqa: B006 - recorded, never mutated
    return best(scores=il.map(trial, over=lrs, data="ab", concurrency=1))


# -- a branch inside the body -------------------------------------------------------------------
@il.step
def label(text: str, n: float) -> str:
    return f"{text}:{n:g}"


@il.pipeline(name="judge")
def judge(lr: float, data: str) -> str:
    s = score(model=fit(lr=lr, data=data))
    with il.when(s > 4.0):
        high = label.named("high")(text="high", n=s)
    with il.otherwise():
        low = label.named("low")(text="low", n=s)
    return label.named("final")(text=il.branch_value(high, low), n=s)


@il.step
def joined(labels: list[str]) -> str:
    return ",".join(labels)


@il.pipeline(name="submap-branch")
def sweep_branch(lrs: list[float] = [0.5, 1.0, 2.0]):  # noqa: B006 - recorded, never mutated
    return joined(labels=il.map(judge, over=lrs, data="abcd"))


# -- nested maps ----------------------------------------------------------------------------------
@il.step
def cells(row: int, width: int) -> list[int]:
    return [row * 10 + c for c in range(width)]


@il.step
def square(x: int) -> int:
    return x * x


@il.step
def row_sum(xs: list[int]) -> int:
    return sum(xs)


@il.pipeline(name="grid-row")
def grid_row(row: int, width: int) -> int:
    return row_sum(xs=il.map(square, over=cells(row=row, width=width)))  # a step map inside the body


@il.step
def grand_total(rows: list[int]) -> int:
    return sum(rows)


@il.pipeline(name="submap-grid")
def grid(rows: list[int] = [1, 2, 3], width: int = 2):  # noqa: B006 - recorded, never mutated
    return grand_total(rows=il.map(grid_row, over=rows, width=width))


@il.step
def add(a: int, b: int) -> int:
    return a + b


@il.pipeline(name="inner-pair")
def inner_pair(a: int, b: int) -> int:
    return add(a=a, b=b)


@il.step
def offsets(k: int) -> list[int]:
    return [k, k + 100]


@il.pipeline(name="outer-pair")
def outer_pair(a: int) -> list[int]:
    return il.map(inner_pair, over=offsets(k=a), item="b", a=a)  # a mapped sub-pipeline inside the body


@il.step
def flat(xs: list[list[int]]) -> list[int]:
    return [x for row in xs for x in row]


@il.pipeline(name="submap-nested")
def nested(xs: list[int] = [1, 2]):  # noqa: B006 - recorded, never mutated
    return flat(xs=il.map(outer_pair, over=xs))


# -- a sub-pipeline call and a zip inside / over ----------------------------------------------------
@il.pipeline(name="prep-score")
def prep_score(lr: float, data: str) -> float:
    return score(model=trial(lr=lr, data=data), bonus=lr)  # a plain sub-pipeline call inside the body


@il.pipeline(name="submap-zip")
def sweep_zip(lrs: list[float] = [1.0, 2.0], datas: list[str] = ["a", "abc"]):  # noqa: B006
    return best(scores=il.map(prep_score, over=il.zip(lr=lrs, data=datas)))


# -- caching ---------------------------------------------------------------------------------------
@il.step(cache=il.Cache(version="1"))
def cached_fit(lr: float, data: str) -> float:
    if lr < 0:
        raise ValueError(f"bad config: learning rate {lr} is negative")
    return lr * len(data)


@il.pipeline(name="cached-trial")
def cached_trial(lr: float, data: str) -> float:
    return score(model=cached_fit(lr=lr, data=data))


@il.pipeline(name="submap-cached")
def sweep_cached(lrs: list[float] = [1.0, -1.0, 2.0]):  # noqa: B006 - recorded, never mutated
    return kept(scores=il.map(cached_trial, over=lrs, data="ab", tolerate=1))


# -- a map over items' fields ----------------------------------------------------------------------
@dataclass
class Pair:
    a: int
    b: float


@il.step
def pairs(n: int) -> list[Pair]:
    return [Pair(i, i / 2) for i in range(1, n + 1)]


@il.step
def combine(a: int, b: float, scale: float = 1.0) -> float:
    if a < 0:
        raise ValueError(f"bad config: a={a} is negative")
    return (a + b) * scale


@il.pipeline(name="fields-dicts")
def fields_dicts():
    # KFP: with dsl.ParallelFor([{"a": 1, "b": 2.0}, ...]) as item: combine(a=item.a, b=item.b)
    return il.map(combine, over=[{"a": 1, "b": 2.0}, {"a": 3, "b": 4.5}], fields=True, scale=2.0)


@il.step
def gappy_records() -> list[dict]:  # the second record has no field b
    return [{"a": 1, "b": 2.0}, {"a": 2}]


@il.pipeline(name="fields-missing")  # module level: kfp-local imports the step in its task
def fields_missing():
    return il.map(combine, over=gappy_records(), fields=True)


@il.pipeline(name="fields-records")
def fields_records(n: int = 3):
    return il.map(combine, over=pairs(n=n), fields=True)  # typed records: checked at build


@il.step
def renamed(x: int, y: float) -> float:
    return x * 10 + y


@il.pipeline(name="fields-renamed")
def fields_renamed(n: int = 2):
    return il.map(renamed, over=pairs(n=n), fields={"a": "x", "b": "y"})


@il.pipeline(name="pair-trial")
def pair_trial(a: int, b: float) -> float:
    return score(model=combine(a=a, b=b), bonus=b)


@il.pipeline(name="fields-subpipeline")
def fields_subpipeline(n: int = 2):
    return il.map(pair_trial, over=pairs(n=n), fields=True)


@dataclass
class Named:
    a: str
    b: float


@il.step
def named_records() -> list[Named]:  # field a is a str: refused for combine's int input
    return []


@il.step
def independent(x: int) -> int:
    return x + 1


@il.pipeline(name="submap-continue", failure_policy="continue")
def sweep_continue(lrs: list[float] = [1.0, -1.0]):  # noqa: B006 - recorded, never mutated
    scores = il.map(trial, over=lrs, data="ab")
    independent(x=1)  # does not read the map: runs under failure_policy="continue"
    return best(scores=scores)


@il.pipeline(name="wrapper")
def wrapper(lrs: list[float]) -> float:
    return best(scores=il.map(trial, over=lrs, data="abc"))  # a mapped call inside a plain call


@il.step
def flag(on: bool) -> bool:
    return on


@il.pipeline(name="submap-placed")
def placed(on: bool = True, lrs: list[float] = [1.0, 2.0]):  # noqa: B006 - recorded, never mutated
    inner = wrapper(lrs=lrs)
    with il.when(flag(on=on)):
        gated = il.map(trial.named("gated"), over=lrs, data="a")  # a mapped call inside an il.when block
        kept(scores=gated)
    return inner


@il.step
def logged_fit(lr: float, gate: str, log: str) -> float:
    with open(log, "a") as f:
        f.write(f"fit {lr}\n")
    if lr < 0 and not Path(gate).exists():
        raise ValueError(f"bad config: learning rate {lr} is negative")
    return abs(lr)


@il.step
def logged_score(model: float, log: str) -> float:
    with open(log, "a") as f:
        f.write(f"score {model}\n")
    return model + 1


@il.pipeline(name="logged-trial")
def logged_trial(lr: float, gate: str, log: str) -> float:
    return logged_score(model=logged_fit(lr=lr, gate=gate, log=log), log=log)


@il.pipeline(name="submap-resume")
def sweep_resume(gate: str, log: str, lrs: list[float] = [1.0, -2.0, 3.0]):  # noqa: B006 - recorded, never mutated
    return best(scores=il.map(logged_trial, over=lrs, gate=gate, log=log))


# -- a tolerant step map and a step map over fields inside a mapped body ----------------------------
@il.step
def row_cells(row: int) -> list[int]:
    return [row, -row, row + 1]


@il.step
def safe_root(x: int) -> float:
    if x < 0:
        raise ValueError(f"bad config: x={x} is negative")
    return x**0.5


@il.step
def row_total(xs: list[float | None]) -> float:
    return sum(x for x in xs if x is not None)


@il.pipeline(name="tolerant-row")
def tolerant_row(row: int) -> float:
    return row_total(xs=il.map(safe_root, over=row_cells(row=row), tolerate=1))  # the -row item fails


@il.pipeline(name="submap-tolerant-inner")
def tolerant_inner(rows: list[int] = [1, 4]):  # noqa: B006 - recorded, never mutated
    return il.map(tolerant_row, over=rows)


@il.step
def row_records(row: int) -> list[dict]:
    return [{"a": row, "b": 1.5}, {"a": row * 2, "b": 0.5}]


@il.pipeline(name="fields-row")
def fields_row(row: int) -> list[float]:
    return il.map(combine, over=row_records(row=row), fields=True)  # a step map over fields inside the body


@il.pipeline(name="submap-fields-inner")
def fields_inner(rows: list[int] = [1, 2]):  # noqa: B006 - recorded, never mutated
    return il.map(fields_row, over=rows)
