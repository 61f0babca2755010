""""Did you mean": the closest of the names a user could have meant, for error hints."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, choices: Iterable[str]) -> str | None:
    """``did you mean 'snapshot'?`` for a near miss of one of ``choices``, else None."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None
