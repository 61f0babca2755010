"""Flyte workflow-execution phases, grouped the way the bridge acts on them.

The numbers are flyteidl's ``WorkflowExecution.Phase`` values; kept here (stdlib only) so
the trigger's event payloads and the tests do not depend on protobuf enums.
"""

from __future__ import annotations

import enum


class Phase(enum.IntEnum):
    UNDEFINED = 0
    QUEUED = 1
    RUNNING = 2
    SUCCEEDING = 3
    SUCCEEDED = 4
    FAILING = 5
    FAILED = 6
    ABORTED = 7
    TIMED_OUT = 8
    ABORTING = 9


# Still going: a retry re-attaches to these instead of launching a duplicate.
ACTIVE = frozenset({Phase.UNDEFINED, Phase.QUEUED, Phase.RUNNING, Phase.SUCCEEDING})
# Ended (or is ending) badly: a retry launches the next generation. FAILING and ABORTING
# count here because they can only end in FAILED or ABORTED, and waiting for that would
# spend an Airflow try on a run that cannot succeed.
FAILED_OR_ENDING = frozenset(
    {Phase.FAILING, Phase.FAILED, Phase.ABORTED, Phase.TIMED_OUT, Phase.ABORTING}
)
TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.ABORTED, Phase.TIMED_OUT})


def phase_name(value: int) -> str:
    try:
        return Phase(value).name
    except ValueError:
        return f"PHASE_{value}"
