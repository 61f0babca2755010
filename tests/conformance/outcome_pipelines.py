"""A gate and its outputs, for the receipt's record of what a run decided and returned."""

from __future__ import annotations

from typing import NamedTuple

import interlock as il


class Verdict(NamedTuple):
    promote: bool
    reason: str
    score: float


@il.step
def judge(score: float, bar: float) -> Verdict:
    return Verdict(score > bar, f"score {score} against bar {bar}", score)


@il.step
def register(score: float) -> str:
    return f"registered at {score}"


@il.pipeline(name="gated-outcome")
def gated_outcome(score: float = 0.9, bar: float = 0.5):
    verdict = judge(score=score, bar=bar)
    with il.when(verdict.promote):
        register(score=verdict.score)
    return verdict.promote, verdict.reason, verdict.score
