"""The environment contract: how a child process (a kfp subprocess, a container, a torch
worker) finds the run it belongs to, and where a run's directories live.

``RunEnv`` is the only code that spells the ``INTERLOCK_*`` variable names; ``EnvName`` is
one such name, and ``exported`` sets them for the length of a block.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from interlock.core.base.status import FailureKind


# -- the environment contract ----------------------------------------------------------------
class EnvName:
    """The environment variables a run is passed through. Spelled nowhere else."""

    PIPELINE = "INTERLOCK_PIPELINE"
    RUN_ID = "INTERLOCK_RUN_ID"
    BACKEND = "INTERLOCK_BACKEND"  # also il.run's default backend outside a step
    STATE_DIR = "INTERLOCK_STATE_DIR"
    # A directory shared by runs (a KFP state volume): the state is STATE_ROOT/runs/<run id>/state.
    STATE_ROOT = "INTERLOCK_STATE_ROOT"
    RETRY_IN_PROCESS = "INTERLOCK_RETRY_IN_PROCESS"
    CHECKPOINT_ROOT = "INTERLOCK_CHECKPOINT_ROOT"
    # Durable run state for backends that retry in a fresh pod (a KFP pipeline root, s3://...):
    # each node's fragment and stop markers are mirrored there (statestore.DurableState).
    STATE_STORE = "INTERLOCK_STATE_STORE"
    # "1" in the task templates the flyte and kfp compilers emit for a cluster: there, and only
    # there, SIGTERM to an interruptible step is a spot reclaim (checkpoint, PREEMPTED, retry).
    # Anywhere else SIGTERM is someone stopping the run (docs/stopping-and-timeouts.md).
    ON_CLUSTER = "INTERLOCK_ON_CLUSTER"
    # Set by a parent that watches a run (kfp-local): a step's output lines are relayed to it
    # as tagged lines on the task's stdout (core/run/live.py); "relay-verbose" keeps foreign logs.
    LIVE = "INTERLOCK_LIVE"


@dataclass(frozen=True)
class RunEnv:
    """The environment contract, each field None when its variable is not set."""

    pipeline: str | None = None
    run_id: str | None = None
    backend: str | None = None
    state_dir: Path | None = None
    state_root: Path | None = None
    retry_in_process: frozenset[FailureKind] | None = None
    checkpoint_root: str | None = None
    state_store: str | None = None
    on_cluster: bool | None = None

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None, *, run_id_env: str | None = None) -> RunEnv:
        """The contract as set; ``run_id_env``: the variable in which the orchestrator gives
        the run id when INTERLOCK_RUN_ID is not set (a backend's ``Capabilities.run_id_env``,
        passed by its task entry point)."""
        env = os.environ if env is None else env
        kinds = env.get(EnvName.RETRY_IN_PROCESS)
        state_dir, state_root = env.get(EnvName.STATE_DIR), env.get(EnvName.STATE_ROOT)
        return cls(
            pipeline=env.get(EnvName.PIPELINE) or None,
            run_id=env.get(EnvName.RUN_ID) or (env.get(run_id_env) if run_id_env else None) or None,
            backend=env.get(EnvName.BACKEND) or None,
            state_dir=Path(state_dir) if state_dir else None,
            state_root=Path(state_root) if state_root else None,
            retry_in_process=frozenset(FailureKind(k) for k in kinds.split(",") if k) if kinds is not None else None,
            checkpoint_root=env.get(EnvName.CHECKPOINT_ROOT) or None,
            state_store=env.get(EnvName.STATE_STORE) or None,
            on_cluster=env[EnvName.ON_CLUSTER] == "1" if env.get(EnvName.ON_CLUSTER) else None,
        )

    def to_env(self) -> dict[str, str]:
        """The variables for the fields that are set."""
        values = {
            EnvName.PIPELINE: self.pipeline,
            EnvName.RUN_ID: self.run_id,
            EnvName.BACKEND: self.backend,
            EnvName.STATE_DIR: str(self.state_dir) if self.state_dir is not None else None,
            EnvName.STATE_ROOT: str(self.state_root) if self.state_root is not None else None,
            EnvName.RETRY_IN_PROCESS: (
                ",".join(sorted(k.value for k in self.retry_in_process)) if self.retry_in_process is not None else None
            ),
            EnvName.CHECKPOINT_ROOT: self.checkpoint_root,
            EnvName.STATE_STORE: self.state_store,
            EnvName.ON_CLUSTER: ("1" if self.on_cluster else "0") if self.on_cluster is not None else None,
        }
        return {k: v for k, v in values.items() if v is not None}

    def run_state_dir(self) -> Path | None:
        """STATE_DIR, else the run's own folder under STATE_ROOT (when the run id is known)."""
        if self.state_dir is not None:
            return self.state_dir
        if self.state_root is not None and self.run_id:
            return state_dir_under(self.state_root, self.run_id)
        return None


@contextmanager
def exported(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of a run (its child processes read them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- layout ------------------------------------------------------------------------------------
def run_dir_under(root: Path, run_id: str) -> Path:
    """A run's folder in a work directory or a volume shared by runs.

    The id becomes one path component, never more: ``../x`` or ``a/b`` would put a run's
    state (and whatever a reused id deletes) outside ``root``. User-given ids are checked
    against the full naming rule before this (backends.check_run_id); ids an orchestrator
    assigns (KFP's run UUID) only need to be one safe component.
    """
    text = str(run_id)
    if not text or text in (".", "..") or any(c in text for c in ("/", "\\", "\0")):
        from interlock.core.base.errors import RunIdError

        raise RunIdError(f"run id {run_id!r} is not a single path component; it cannot name a run folder")
    return Path(root) / "runs" / text


def state_dir_of(run_dir: Path) -> Path:
    """Where the shim's state lives inside a run's folder."""
    return Path(run_dir) / "state"


def state_dir_under(root: Path, run_id: str) -> Path:
    return state_dir_of(run_dir_under(root, run_id))
