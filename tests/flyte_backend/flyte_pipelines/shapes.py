"""Graph shapes: nested gates, ordering-only edges, dataclass field bindings, JSON lists/dicts."""

from __future__ import annotations

import os
from dataclasses import dataclass

import interlock as il


@dataclass
class Report:
    score: float
    passed: bool
    tags: list[str]


def _log(line: str) -> None:
    path = os.environ.get("INTERLOCK_TEST_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(line + "\n")


@il.step
def prepare(n: int) -> None:
    _log(f"prepare {n}")


@il.step
def score(n: int, extra: dict, weights: list) -> Report:
    s = n * weights[0] + extra.get("bonus", 0)
    return Report(score=float(s), passed=s > 3, tags=[f"n{n}"])


@il.step
def big_enough(report: Report, limit: float) -> bool:
    return report.score > limit


@il.step
def passed(report: Report) -> bool:
    return report.passed


@il.step
def publish(score: float, note: str | None = None) -> str:
    _log(f"publish {score} {note}")
    return f"published {score}"


@il.step
def announce(message: str) -> None:
    _log(f"announce {message}")


@il.pipeline(name="flyte-field-gate")
def field_gate(n: int = 2):
    report = score(n=n, extra={}, weights=[1])
    with il.when(report.passed):
        announce(message="passed")


@il.pipeline(name="flyte-shapes")
def shapes(n: int = 2, limit: float = 5.0, tags: list | None = None):
    ready = prepare(n=n)
    report = score(n=n, extra={"bonus": 1}, weights=[2], after=ready)
    with il.when(passed(report=report)):
        publish(score=report.score, note="passed")
        big = big_enough(report=report, limit=limit)
        with il.when(big):
            msg = publish.named("publish_big")(score=report.score)
            announce(message=msg)
    return report
