"""``StepLine``: one line a running step printed or logged (core/run/live.py relays and routes it).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from interlock.core.run.live import STDOUT, TAG


@dataclass(frozen=True)
class StepLine:
    """One line a step printed or logged. ``node`` is "" for a record outside any step."""

    node: str
    text: str
    stream: str = STDOUT  # STDOUT, STDERR or LOG
    level: str = ""  # a log record's level name
    logger: str = ""
    at: float = 0.0

    def encode(self) -> str:
        return TAG + json.dumps(asdict(self), separators=(",", ":"))
