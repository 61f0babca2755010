"""One place for the Airflow imports that moved between 2.10 and 3.x.

Airflow 3 exposes the authoring API in ``airflow.sdk``; 2.10 keeps it in ``airflow.models``
and friends. Everything else in this package imports from here.
"""

from __future__ import annotations

from airflow import __version__ as AIRFLOW_VERSION

try:  # Airflow 3.x
    from airflow.sdk import DAG, BaseHook, BaseOperator, BaseOperatorLink, BaseSensorOperator
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
    from airflow.sdk.execution_time.xcom import XCom

    AIRFLOW_3 = True
except ImportError:  # Airflow 2.10
    from airflow.exceptions import AirflowException, AirflowFailException  # type: ignore[no-redef]
    from airflow.hooks.base import BaseHook  # type: ignore[attr-defined,no-redef]
    from airflow.models import DAG, BaseOperator
    from airflow.models.baseoperatorlink import BaseOperatorLink  # type: ignore[no-redef]
    from airflow.models.xcom import XCom  # type: ignore[no-redef]
    from airflow.sensors.base import BaseSensorOperator  # type: ignore[no-redef]

    AIRFLOW_3 = False

from airflow.triggers.base import BaseTrigger, TriggerEvent

# Airflow 3.3 calls BaseTrigger.on_kill() when a user acts on a deferred task (mark
# failed, clear); older versions only cancel the trigger's coroutine.
TRIGGER_ON_KILL = "on_kill" in vars(BaseTrigger)

def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` (False when unset), as providers read it."""
    from airflow.configuration import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)


__all__ = [
    "AIRFLOW_3",
    "AIRFLOW_VERSION",
    "TRIGGER_ON_KILL",
    "DAG",
    "AirflowException",
    "default_deferrable",
    "AirflowFailException",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "BaseTrigger",
    "TriggerEvent",
    "XCom",
]
