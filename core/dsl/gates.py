"""Built-in gates. A gate is an ordinary step that returns a decision; ``il.when`` acts on it."""

from __future__ import annotations

import math
from typing import NamedTuple

from interlock.core.dsl.step import step
from interlock.core.model.artifacts import Metrics


class GateDecision(NamedTuple):
    promote: bool
    reason: str
    challenger_score: float
    champion_score: float


@step
def champion_gate(
    challenger: Metrics,
    metric: str,
    margin: float = 0.0,
    champion: Metrics | None = None,
    higher_is_better: bool = True,
) -> GateDecision:
    """Promote the challenger only if it beats the champion by ``margin`` on ``metric``.

    The margin is fixed before the run (a pipeline parameter), never tuned on the test
    split. With no champion yet, the challenger is promoted. The decision and both scores
    are outputs, so every backend records them.
    """
    if metric not in challenger:
        raise KeyError(f"challenger metrics have no {metric!r}; got {sorted(challenger)}")
    ours = float(challenger[metric])
    if math.isnan(ours):
        return GateDecision(False, f"challenger {metric} is NaN", ours, math.nan)
    if champion is None or metric not in champion:
        return GateDecision(True, f"no champion yet; challenger {metric}={ours:.4f}", ours, math.nan)
    theirs = float(champion[metric])
    gain = ours - theirs if higher_is_better else theirs - ours
    promote = gain >= margin
    verdict = "promote" if promote else "keep champion"
    reason = f"{verdict}: challenger {metric}={ours:.4f} vs champion {theirs:.4f} (gain {gain:+.4f}, margin {margin:.4f})"
    return GateDecision(promote, reason, ours, theirs)
