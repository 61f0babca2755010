"""The Airflow-to-Flyte trigger bridge (an Airflow provider).

``FlyteHook`` (connection type ``flyte``), ``FlyteLaunchPlanOperator``,
``FlyteExecutionTrigger``, ``FlyteExecutionSensor`` and ``dag_for``. Names resolve lazily,
so Airflow's provider discovery can import ``.provider`` without loading Airflow's
authoring API or flytekit.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FlyteHook": "hook",
    "ExecutionRef": "hook",
    "ExecutionStatus": "hook",
    "LaunchResult": "hook",
    "FlyteLaunchPlanOperator": "operators",
    "FlyteExecutionTrigger": "triggers",
    "FlyteExecutionSensor": "sensors",
    "dag_for": "dag_factory",
    "get_provider_info": "provider",
    "Phase": "phases",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
