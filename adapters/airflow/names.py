"""Where an Airflow task finds its run: the variables airflow-local sets, or on a deployment
the state root compiled into the DAG and Airflow's own run id. Task ids."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.core.base.status import FailureKind
from interlock.core.run.env import EnvName, RunEnv, run_dir_under, state_dir_of
from interlock.core.run.records import ALL_KINDS

BACKEND = "airflow"
LOCAL_BACKEND = "airflow-local"
RUN_DIR_ENV = "INTERLOCK_AIRFLOW_RUN_DIR"  # airflow-local: the run's folder (values, records, state)
CACHE_DIR_ENV = "INTERLOCK_AIRFLOW_CACHE_DIR"
CACHE_ENV = "INTERLOCK_AIRFLOW_CACHE"  # "0": the run was asked not to use the cache
# A map's tasks: <node>.items (decide, count), <node> (one mapped instance per item), <node>.collect.
ITEMS, COLLECT = ".items", ".collect"
_TASK_ID = re.compile(r"[^A-Za-z0-9_.-]")
# retries="airflow": what Airflow retries (a new try of the task, after the step's backoff);
# the shim retries the other kinds in the task itself.
BY_AIRFLOW = frozenset({FailureKind.CONTENTION, FailureKind.PREEMPTED, FailureKind.TIMEOUT})


def task_id(name: str) -> str:
    """An Airflow task id for a node or gate name (Airflow allows letters, digits, ``_ . -``)."""
    return _TASK_ID.sub("_", name)


def gate_task_id(gate_id: str) -> str:
    return task_id(f"{gate_id}.when")


def run_id_for(airflow_run_id: str) -> str:
    """An interlock run id (a Flyte-style name, at most 20 characters) for an Airflow run."""
    return "af-" + hashlib.sha256(airflow_run_id.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunPlace:
    run_id: str
    backend: str
    run_dir: Path
    cache_dir: Path
    cache: bool = True
    checkpoint_root: str | None = None
    retry_in_process: frozenset[FailureKind] = ALL_KINDS
    on_cluster: bool = False
    airflow_retries: bool = False  # a failure of a kind in BY_AIRFLOW ends the task for Airflow to retry

    @property
    def state_dir(self) -> Path:
        return state_dir_of(self.run_dir)

    @classmethod
    def here(cls, options: dict[str, Any], airflow_run_id: str) -> RunPlace:
        """airflow-local's run (the variables its driver sets), else a deployment's: the run
        folder under the compiled ``state_root``, named from Airflow's run id."""
        env = RunEnv.read()
        run_dir = os.environ.get(RUN_DIR_ENV)
        if run_dir and env.run_id:
            return cls(env.run_id, env.backend or LOCAL_BACKEND, Path(run_dir), Path(os.environ[CACHE_DIR_ENV]),
                       cache=os.environ.get(CACHE_ENV, "1") != "0", checkpoint_root=env.checkpoint_root,
                       retry_in_process=env.retry_in_process if env.retry_in_process is not None else ALL_KINDS)
        root = Path(options.get("state_root") or "/opt/interlock")
        run_id = run_id_for(airflow_run_id)
        by_airflow = options.get("retries", "airflow") == "airflow"
        return cls(run_id, BACKEND, run_dir_under(root, run_id), root / "cache",
                   checkpoint_root=options.get("checkpoint_store") or None, on_cluster=True,
                   retry_in_process=ALL_KINDS - BY_AIRFLOW if by_airflow else ALL_KINDS, airflow_retries=by_airflow)

    def env(self) -> dict[str, str]:
        """The variables a child (a pod's entry) needs to find this run again."""
        return {
            **RunEnv(run_id=self.run_id, backend=self.backend, state_dir=self.state_dir,
                     retry_in_process=self.retry_in_process, checkpoint_root=self.checkpoint_root,
                     on_cluster=self.on_cluster or None).to_env(),
            RUN_DIR_ENV: str(self.run_dir), CACHE_DIR_ENV: str(self.cache_dir), CACHE_ENV: "1" if self.cache else "0",
            EnvName.PIPELINE: os.environ.get(EnvName.PIPELINE, ""),
        }
