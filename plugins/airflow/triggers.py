"""``FlyteExecutionTrigger``: waits for a Flyte execution in the triggerer, holding no worker slot.

Serialized as a classpath plus JSON-able kwargs and rebuilt in the triggerer process, so it
carries names, never clients. Each poll is one GetExecution call run in a thread, so a
slow FlyteAdmin never blocks the triggerer's event loop.

Cancellation. Airflow 3.3 calls ``on_kill()`` when a user marks the deferred task failed
or clears it: the execution is terminated there. A plain cancel (triggerer restart or
rebalancing) leaves the execution running, since the trigger resumes elsewhere. On older
Airflow, which has no ``on_kill`` for triggers, a cancel terminates the execution unless
the task instance is still DEFERRED (which means the triggerer, not the user, stopped it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from interlock.plugins.airflow.compat import TRIGGER_ON_KILL, BaseTrigger, TriggerEvent
from interlock.plugins.airflow.hook import FlyteHook
from interlock.plugins.airflow.phases import TERMINAL, Phase

# Event statuses; the operator's execute_complete maps them to success or failure.
SUCCESS = "success"
FAILED = "failed"
TIMEOUT = "timeout"
ERROR = "error"

KILL_CAUSE = "Airflow task was killed while waiting"


def event_payload(
    status: str, ref: dict[str, str], phase: str | None, message: str | None
) -> dict[str, Any]:
    return {"status": status, "execution": ref, "phase": phase, "message": message}


class FlyteExecutionTrigger(BaseTrigger):
    """Fires once, when the execution reaches a terminal phase, the deadline passes, or polling fails."""

    def __init__(
        self,
        *,
        execution_name: str,
        project: str,
        domain: str,
        flyte_conn_id: str = FlyteHook.default_conn_name,
        poll_interval: float = 30.0,
        deadline: float | None = None,
        owns_execution: bool = True,  # False (a sensor): never terminate it
        max_poll_errors: int = 5,
    ) -> None:
        super().__init__()
        self.execution_name = execution_name
        self.project = project
        self.domain = domain
        self.flyte_conn_id = flyte_conn_id
        self.poll_interval = float(poll_interval)
        self.deadline = deadline  # epoch seconds; None waits for ever
        self.owns_execution = owns_execution
        self.max_poll_errors = max_poll_errors
        self._hook: FlyteHook | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "execution_name": self.execution_name,
                "project": self.project,
                "domain": self.domain,
                "flyte_conn_id": self.flyte_conn_id,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
                "owns_execution": self.owns_execution,
                "max_poll_errors": self.max_poll_errors,
            },
        )

    @property
    def _ref(self) -> dict[str, str]:
        return {"project": self.project, "domain": self.domain, "name": self.execution_name}

    async def _get_hook(self) -> FlyteHook:
        if self._hook is None:
            # Connections must be read without blocking the event loop (Airflow 3 triggerer).
            if hasattr(FlyteHook, "aget_connection"):
                conn = await FlyteHook.aget_connection(self.flyte_conn_id)
            else:  # Airflow 2.10
                conn = await asyncio.to_thread(FlyteHook.get_connection, self.flyte_conn_id)
            self._hook = FlyteHook(
                self.flyte_conn_id, project=self.project, domain=self.domain, connection=conn
            )
        return self._hook

    async def _terminate(self, cause: str) -> bool:
        hook = await self._get_hook()
        return await asyncio.to_thread(hook.terminate, self.execution_name, cause)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from flytekit.exceptions.base import FlyteException

        errors = 0
        try:
            hook = await self._get_hook()
            while True:
                try:
                    status = await asyncio.to_thread(hook.get_status, self.execution_name)
                    errors = 0
                except FlyteException as exc:  # flytekit already retried the RPC itself
                    errors += 1
                    self.log.warning("poll %d of %s failed: %s", errors, self.execution_name, exc)
                    if errors >= self.max_poll_errors:
                        yield TriggerEvent(
                            event_payload(ERROR, self._ref, None, f"FlyteAdmin unreachable: {exc}")
                        )
                        return
                    await asyncio.sleep(self.poll_interval)
                    continue
                if status.phase in TERMINAL:
                    kind = SUCCESS if status.phase == Phase.SUCCEEDED else FAILED
                    yield TriggerEvent(
                        event_payload(kind, self._ref, status.phase_name, status.message)
                    )
                    return
                remaining = None if self.deadline is None else self.deadline - time.time()
                if remaining is not None and remaining <= 0:
                    message = "deadline reached"
                    if self.owns_execution:
                        await asyncio.to_thread(
                            hook.terminate,
                            self.execution_name,
                            "Airflow timeout reached while waiting",
                        )
                        message += "; execution terminated"
                    yield TriggerEvent(
                        event_payload(TIMEOUT, self._ref, status.phase_name, message)
                    )
                    return
                await asyncio.sleep(
                    self.poll_interval if remaining is None else min(self.poll_interval, remaining)
                )
        except asyncio.CancelledError:
            if self.owns_execution and not TRIGGER_ON_KILL and not await self._still_deferred():
                await self._terminate(KILL_CAUSE)
            raise
        except Exception as exc:  # a trigger that raises loses the message; report it instead
            yield TriggerEvent(
                event_payload(ERROR, self._ref, None, f"{type(exc).__name__}: {exc}")
            )

    async def on_kill(self) -> None:
        """Airflow 3.3+: the user killed the deferred task; stop the GPU work it started."""
        if self.owns_execution:
            await self._terminate(KILL_CAUSE)

    async def _still_deferred(self) -> bool:
        """Pre-3.3 fallback: a DEFERRED task instance means the triggerer, not a user, cancelled us."""
        ti = self.task_instance
        if ti is None:
            return False
        try:
            from airflow.utils.state import TaskInstanceState

            state = getattr(ti, "state", None)
            if state is None and hasattr(ti, "refresh_from_db"):
                await asyncio.to_thread(ti.refresh_from_db)
                state = ti.state
            return state == TaskInstanceState.DEFERRED
        except Exception:
            return False
