"""Run state that outlives a pod: each node's fragment and stop markers, mirrored to a store.

A KFP retry runs in a fresh pod, so what the shim wrote to the pod's filesystem (the stop
marker that says "do not run this again", the fragment that holds the retry budget spent
so far) is gone unless it lives on shared storage. A PVC mounted as the state root is one
such place; a store URI is the other: the KFP pipeline root (``s3://...``, ``gs://...``) or
any directory that every pod mounts. The state is kept through the checkpoint store seam
(``store_for_uri``): the same atomic, manifest-last writes that checkpoints rely on, so a
pod killed mid-write leaves the previous state, never half of one.

The shim pulls a node's state before it runs the node and pushes it after every write.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from interlock.core.base.errors import CheckpointError
from interlock.core.checkpoint.store import CheckpointStore, store_for_uri
from interlock.core.run.state import RunState

log = logging.getLogger("interlock.statestore")

__all__ = ["DurableState", "state_key"]

STATE_SEGMENT = "interlock-state"
KEEP = 2  # the newest and the one before (a reader racing a prune still finds one)


def state_key(pipeline: str, run_id: str, node: str) -> str:
    """The store key of one node's state in one run (beside, never inside, its checkpoints)."""
    return f"{pipeline}/{run_id}/{STATE_SEGMENT}/{node}"


@dataclass
class DurableState:
    """Mirrors one run's node state between the local state directory and a store."""

    uri: str
    pipeline: str
    run_id: str
    _store: CheckpointStore | None = None

    @property
    def store(self) -> CheckpointStore:
        if self._store is None:
            self._store = store_for_uri(self.uri)
        return self._store

    def pull(self, state: RunState, node: str) -> None:
        """Bring ``node``'s durable state into ``state`` (a fresh pod starts with none)."""
        try:
            loaded = self.store.load_latest(state_key(self.pipeline, self.run_id, node), fallback=True)
        except CheckpointError as exc:
            raise CheckpointError(
                f"cannot read the run state of step {node!r} (run {self.run_id}) from {self.uri}: {exc}",
                hint="the state store must be readable from every pod (credentials, endpoint)",
            ) from exc
        if loaded is None:
            return
        names = set(loaded.names)
        for path in state.node_files(node):
            if path.name in names:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.pull")
                tmp.write_bytes(loaded.read_bytes(path.name))
                tmp.replace(path)

    def push(self, state: RunState, node: str) -> bool:
        """Store ``node``'s local state (fragment and markers) as its newest durable state.

        A store that cannot be written is logged, never raised: the step's own outcome (its
        outputs, or the failure that stopped it) must reach the backend either way; the cost
        is that a backend retry may run the step again.
        """
        files = {p.name: Path(p) for p in state.node_files(node) if p.exists()}
        if not files:
            return False
        key = state_key(self.pipeline, self.run_id, node)
        try:
            self.store.save(key, files, metadata={"run_id": self.run_id, "node": node})
        except (CheckpointError, OSError) as exc:
            log.error(
                "could not keep the run state of step %s (run %s) in %s: %s; a backend retry may run it again",
                node, self.run_id, self.uri, exc,
            )
            return False
        try:
            self.store.prune(key, KEEP)
        except CheckpointError as exc:  # an old copy left behind costs bytes, never correctness
            log.warning("could not prune old run state of %s in %s: %s", node, self.uri, exc)
        return True
