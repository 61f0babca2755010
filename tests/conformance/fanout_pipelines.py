"""Pipelines for the fan-out / fan-in conformance cases (tests/conformance/test_fanout.py)."""

from __future__ import annotations

import json
from pathlib import Path

import interlock as il
from interlock.core.dsl.fanout import map as il_map  # il.map once exported from interlock


@il.step
def scale(x: int, factor: int) -> int:
    return x * factor


@il.step
def numbers(n: int) -> list[int]:
    return list(range(1, n + 1))


@il.step
def total(parts: list[int]) -> int:
    return sum(parts)


@il.step
def listing(parts: list[int]) -> list[int]:
    return list(parts)


@il.step
def fragile(x: int) -> int:
    if x % 4 == 0:
        raise ValueError(f"bad config: item {x} is a multiple of four")
    return x * 10


@il.step
def present(parts: list[int | None]) -> list[int]:
    """The indices that came back (a tolerant map's failed items are None)."""
    return [i for i, p in enumerate(parts) if p is not None]


@il.step
def shard(x: int) -> il.Dataset:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="shard-"))
    (path / "rows.json").write_text(json.dumps(list(range(x))))
    return il.Dataset(path, {"rows": x})


@il.step
def merge(shards: list[il.Dataset]) -> list[int]:
    rows = [json.loads((Path(s.path) / "rows.json").read_text()) for s in shards]
    return [len(shards), sum(len(r) for r in rows), sum(s.metadata["rows"] for s in shards)]


@il.pipeline(name="fan-param")
def over_param(xs: list[int] = [1, 2, 3], factor: int = 10):  # noqa: B006 - recorded, never mutated
    scaled = il_map(scale, over=xs, factor=factor, concurrency=2)
    return total(parts=scaled), listing(parts=scaled)


@il.pipeline(name="fan-output")
def over_output(n: int = 4):
    scaled = il_map(scale, over=numbers(n=n), factor=3)
    return listing(parts=scaled)


@il.pipeline(name="fan-empty")
def over_empty(n: int = 0):
    return total(parts=il_map(scale, over=numbers(n=n), factor=3))


@il.pipeline(name="fan-fail")
def fail_fast(n: int = 5):
    return total(parts=il_map(fragile, over=numbers(n=n)))


@il.pipeline(name="fan-tolerate")
def tolerant(n: int = 8):
    return present(parts=il_map(fragile, over=numbers(n=n), tolerate=0.25))


@il.pipeline(name="fan-tolerate-over")
def tolerant_exceeded(n: int = 8):
    return present(parts=il_map(fragile, over=numbers(n=n), tolerate=0.1))


@il.pipeline(name="fan-tolerate-all")
def tolerate_all(n: int = 8):
    """tolerate=1.0 is a fraction: every item may fail (issue 31 item 7)."""
    return present(parts=il_map(fragile, over=numbers(n=n), tolerate=1.0))


@il.pipeline(name="fan-tolerate-one")
def tolerate_one(n: int = 8):
    """tolerate=1 is a count: one item may fail (here two do)."""
    return present(parts=il_map(fragile, over=numbers(n=n), tolerate=1))


@il.step
def unsendable(x: int) -> dict:
    """Returns normally, but every fourth item's value cannot cross the step boundary (a set)."""
    return {"x": x, "tags": {"a", "b"}} if x % 4 == 0 else {"x": x}


@il.step
def kept(parts: list[dict | None]) -> list[int]:
    return [i for i, p in enumerate(parts) if p is not None]


@il.pipeline(name="fan-unsendable-tolerated")
def unsendable_tolerated(n: int = 8):
    return kept(parts=il_map(unsendable, over=numbers(n=n), tolerate=0.25))


@il.pipeline(name="fan-unsendable")
def unsendable_strict(n: int = 5):
    return kept(parts=il_map(unsendable, over=numbers(n=n)))


@il.pipeline(name="fan-in-literal")
def literal(x: int = 2):
    a = scale.named("a")(x=x, factor=1)
    b = scale.named("b")(x=x, factor=2)
    return total(parts=[a, b, 7])


@il.step
def nothing(x: int) -> int | None:
    return None


@il.step
def echo_floats(parts: list[float | None]) -> list[float | None]:
    return list(parts)


@il.step
def as_text(x: int) -> str:
    return str(x)


@il.step
def echo_texts(parts: list[str]) -> list[str]:
    return list(parts)


@il.step
def odd_none(x: int) -> int | None:
    return None if x % 2 else x


@il.step
def echo_ints(parts: list[int | None]) -> list[int | None]:
    return list(parts)


@il.pipeline(name="fan-optional-items")
def optional_items(xs: list[int] = [1, 2, 3, 4]):  # noqa: B006 - recorded, never mutated
    return echo_ints(parts=il_map(odd_none, over=xs))


@il.pipeline(name="fan-in-literal-mixed")
def literal_mixed(x: int = 2, label: str = "p"):
    a = scale.named("a")(x=x, factor=1)
    b = scale.named("b")(x=x, factor=2)
    floats = echo_floats(parts=[a, nothing.named("none")(x=x), b, 7.5])  # ints widen, None stays None
    return floats, echo_texts(parts=[label, as_text.named("text")(x=x), label])


@il.pipeline(name="fan-in-literal-datasets")
def literal_datasets():
    return merge(shards=[shard.named("s1")(x=1), shard.named("s2")(x=2)])


@il.pipeline(name="fan-datasets")
def datasets(sizes: list[int] = [1, 2, 3]):  # noqa: B006 - recorded, never mutated
    return merge(shards=il_map(shard, over=sizes))


@il.step
def count_shards(shards: list[il.Dataset | None]) -> int:
    return sum(s is not None for s in shards)


@il.pipeline(name="fan-tolerate-datasets")
def tolerant_datasets(sizes: list[int] = [1, 2, 3]):  # noqa: B006 - recorded, never mutated
    return count_shards(shards=il_map(shard, over=sizes, tolerate=0.5))


@il.step
def positive(x: int) -> bool:
    return x > 0


@il.pipeline(name="fan-in-branch")
def map_in_branch(x: int = 2):
    with il.when(positive(x=x)):
        listing(parts=il_map(scale, over=numbers(n=x), factor=2))
    return scale.named("after")(x=x, factor=1)


@il.pipeline(name="fan-in-literal-branch")
def literal_in_branch(x: int = 2):
    a = scale.named("a")(x=x, factor=1)
    b = scale.named("b")(x=x, factor=2)
    with il.when(positive(x=x)):
        total(parts=[a, b])
    return a


@il.step
def greet(msg: str, note: str | None = None, mark: str = "x") -> str:
    return f"{msg}-{note}-{mark}"


@il.step
def joined(parts: list[str]) -> str:
    return ",".join(parts)


@il.pipeline(name="fan-defaults")
def defaults_unbound(xs: list[str] = ["a", "b"]):  # noqa: B006 - recorded, never mutated
    """The item step's defaulted inputs are left to their defaults (None and "x")."""
    return joined(parts=il_map(greet, over=xs))


@il.step
def price() -> float:
    return 7.0


@il.step
def times(x: int, price: float) -> float:
    return x * price


@il.step
def ftotal(parts: list[float]) -> float:
    return sum(parts)


@il.step
def three() -> int:
    return 3


@il.pipeline(name="fan-broadcast-output")
def broadcast_output(xs: list[int] = [1, 2, 3]):  # noqa: B006 - recorded, never mutated
    """Step outputs broadcast to every item (a float and an int), beside a parameter."""
    return ftotal(parts=il_map(times, over=xs, price=price())), listing(parts=il_map(scale, over=xs, factor=three()))


@il.step
def second_fails(x: int) -> int:
    if x == 2:
        raise ValueError(f"bad config: item {x}")
    return x


@il.pipeline(name="fan-second-fails")
def second_item_fails(xs: list[int] = [1, 2, 3, 4]):  # noqa: B006 - recorded, never mutated
    return total(parts=il_map(second_fails, over=xs))


@il.pipeline(name="fan-second-fails-serial")
def second_item_fails_serial(xs: list[int] = [1, 2, 3, 4]):  # noqa: B006 - recorded, never mutated
    return total(parts=il_map(second_fails, over=xs, concurrency=1))


RUNS = "FANOUT_RUNS_FILE"  # where cached_fragile counts its calls, when set


@il.step(cache=il.Cache())
def cached_fragile(x: int) -> int:
    import os

    if os.environ.get(RUNS):
        with open(os.environ[RUNS], "a") as f:
            f.write(f"{x}\n")
    if x % 4 == 0:
        raise ValueError(f"bad config: item {x} is a multiple of four")
    return x * 10


@il.pipeline(name="fan-tolerate-cached")
def tolerant_cached(xs: list[int] = [1, 2, 3, 4, 5, 6, 7, 8]):  # noqa: B006 - recorded, never mutated
    return present(parts=il_map(cached_fragile, over=xs, tolerate=0.25))


@il.step
def nonneg(x: int) -> int:
    if x < 0:
        raise ValueError(f"bad item {x}")
    return x


@il.step
def kept_items(parts: list[int | None]) -> list[int | None]:
    return list(parts)


@il.pipeline(name="fan-resume-tolerant")
def resume_tolerant(xs: list[int] = [1, 2, 3, -4, -5]):  # noqa: B006 - recorded, never mutated
    return kept_items(parts=il_map(nonneg, over=xs, tolerate=0.5))


@il.pipeline(name="fan-resume-strict")
def resume_strict(xs: list[int] = [1, -2]):  # noqa: B006 - recorded, never mutated
    return listing(parts=il_map(nonneg, over=xs))


@il.step
def kept_optional(parts: list[int | None]) -> list[int | None]:
    return list(parts)


@il.pipeline(name="fan-into-optional-list")
def into_optional_list(n: int = 3):
    # A list[int] (a step's, a map's) into a list[int | None] input, as Python typing allows.
    return kept_optional(parts=numbers(n=n)), kept_optional.named("kept-map")(parts=il_map(scale, over=numbers.named(
        "numbers-b")(n=n), factor=2))


@il.step
def maybe_double(x: int) -> int | None:
    return None if x == 2 else 2 * x


@il.step
def plus(a: int, b: int | None) -> int:
    return a + (b or 0)


@il.pipeline(name="fan-over-optional-lists")
def over_optional_lists(xs: list[int] = [1, 2, 3]):  # noqa: B006 - recorded, never mutated
    # A map over a map's Optional outputs, and over a tolerant map's output (None at failed items).
    optional = il_map(plus, over=il_map(maybe_double, over=xs), item="b", a=1)
    tolerated = il_map(plus.named("plus-tolerated"), over=il_map(fragile, over=[1, 4, 2], tolerate=0.5), item="b", a=1)
    return optional, tolerated
