"""The trigger's trip from a worker to a triggerer, each side in its own process.

worker:    python bridge_trigger_process.py worker WIRE_JSON SPEC_JSON
    checks the hook's launch race (``hook_checks``), then builds one FlyteExecutionTrigger per spec entry, calls ``serialize()`` and encodes the
    kwargs with Airflow's serde, as the task runner does for a DeferTask message.
triggerer: python bridge_trigger_process.py triggerer WIRE_JSON OUT_JSON SPEC_JSON
    stores each as the API server would (``Trigger.encrypt_kwargs``), then hands it to
    Airflow's own ``TriggerRunner`` as a ``RunTrigger`` workload: decrypt, decode, import
    the class by its path, run. Spec actions: ``complete`` (wait for the event),
    ``user_kill`` (the runner's user-action cancel, which calls ``on_kill``) and
    ``shutdown`` (a plain cancel, as when a triggerer stops).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time


def hook_checks(out_path: str) -> None:
    """Worker-side hook behaviour that dag.test() cannot provoke: a lost launch race."""
    from interlock.plugins.airflow.hook import FlyteHook
    from interlock.plugins.airflow.names import logical_run_key

    hook = FlyteHook()  # the flyte_default connection, as a task would read it
    key = logical_run_key(
        dag_id="race",
        task_id="t",
        run_id="r",
        map_index=-1,
        project=hook.project,
        domain=hook.domain,
        launch_plan="lp-race",
    )
    first = hook.launch_or_attach(key, launch_plan="lp-race")
    # Another try that also saw NOT_FOUND now creates the same name: ALREADY_EXISTS.
    second_created = hook.create_execution(first.status.ref.name, launch_plan="lp-race")
    again = hook.launch_or_attach(key, launch_plan="lp-race")
    ok, message = hook.test_connection()
    with open(out_path, "w") as fh:
        json.dump(
            {
                "name": first.status.ref.name,
                "first_created": first.created,
                "second_created": second_created,
                "again": [again.status.ref.name, again.created],
                "test_connection": [ok, message],
            },
            fh,
        )


def worker(wire_path: str, spec: list[dict]) -> None:
    hook_checks(wire_path + ".hook.json")

    from airflow.sdk.serde import serialize

    from interlock.plugins.airflow.triggers import FlyteExecutionTrigger

    wire = []
    for entry in spec:
        kwargs = dict(entry["trigger"])
        if "deadline_in" in entry:
            kwargs["deadline"] = time.time() + entry["deadline_in"]
        classpath, trigger_kwargs = FlyteExecutionTrigger(**kwargs).serialize()
        wire.append({"classpath": classpath, "kwargs": serialize(trigger_kwargs)})
    with open(wire_path, "w") as fh:
        json.dump(wire, fh)


async def _triggerer(wire: list[dict], spec: list[dict]) -> dict:
    from airflow.executors import workloads
    from airflow.jobs.triggerer_job_runner import TriggerRunner
    from airflow.models.trigger import Trigger
    from airflow.sdk.serde import deserialize

    runner = TriggerRunner()
    for trigger_id, item in enumerate(wire, start=1):
        encrypted = Trigger.encrypt_kwargs(deserialize(item["kwargs"]))
        runner.to_create.append(
            workloads.RunTrigger(
                id=trigger_id, classpath=item["classpath"], encrypted_kwargs=encrypted, ti=None
            )
        )
    await runner.create_triggers()
    failed = [str(exc) for _, exc in runner.failed_triggers]
    tasks = {tid: details["task"] for tid, details in runner.triggers.items()}

    async def act(trigger_id: int, entry: dict) -> str:
        task = tasks[trigger_id]
        if entry["action"] != "complete":
            await asyncio.sleep(entry.get("after", 0.5))
            if entry["action"] == "user_kill":
                runner.to_cancel.append(trigger_id)
                await runner.cancel_triggers()
            else:
                task.cancel()
        try:
            await asyncio.wait_for(task, timeout=60)
        except asyncio.CancelledError:
            return "cancelled"
        return "finished"

    outcomes = await asyncio.gather(
        *(act(tid, entry) for tid, entry in zip(tasks, spec, strict=True))
    )
    events: dict[int, list] = {tid: [] for tid in tasks}
    for entry in runner.events:
        events[entry.trigger_id].append(entry.event.payload)
    return {
        "failed": failed,
        "results": [
            {"name": entry["trigger"]["execution_name"], "outcome": outcome, "events": events[tid]}
            for (tid, entry), outcome in zip(zip(tasks, spec, strict=True), outcomes, strict=True)
        ],
    }


def main() -> None:
    mode = sys.argv[1]
    if mode == "worker":
        worker(sys.argv[2], json.loads(sys.argv[3]))
        return
    wire_path, out_path, spec = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    with open(wire_path) as fh:
        wire = json.load(fh)
    result = asyncio.run(_triggerer(wire, spec))
    result["wire"] = wire
    with open(out_path, "w") as fh:
        json.dump(result, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
