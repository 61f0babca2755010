"""The step policies a step opts into: tolerations, checkpoints, torchrun, secrets.

The policies every step has (resources, cache, labels) are in ``policies.py``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from interlock.core.base.errors import PolicyError


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None  # NoSchedule | PreferNoSchedule | NoExecute

    def __post_init__(self) -> None:
        if self.operator not in ("Equal", "Exists"):
            raise PolicyError(f"toleration {self.key!r}: operator {self.operator!r} must be Equal or Exists")
        if self.effect not in (None, "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise PolicyError(f"toleration {self.key!r}: effect {self.effect!r} is not a Kubernetes taint effect")


@dataclass(frozen=True)
class CheckpointPolicy:
    """How often a step should checkpoint and how many committed checkpoints to keep.

    ``store`` is a URI: None (the run's local checkpoint directory), a path, or
    ``s3://bucket/prefix`` (the s3 plugin). ``every`` is advisory: ``ctx.checkpoint_due()``
    tells the step when it has been that long since the last save.
    """

    every: str | float = "30m"
    keep: int = 2
    store: str | None = None

    def __post_init__(self) -> None:
        from interlock.core.base.durations import parse_duration

        parse_duration(self.every)
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 1:
            raise PolicyError(f"CheckpointPolicy keep={self.keep!r} must be an integer >= 1")

    @property
    def every_s(self) -> float:
        from interlock.core.base.durations import parse_duration

        return parse_duration(self.every)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckpointPolicy:
        return cls(**data)


@dataclass(frozen=True)
class Torchrun:
    """Distributed PyTorch for one step: ``nnodes`` x ``nproc_per_node`` workers.

    A fixed world (``min_nodes`` unset) renders as a PyTorchJob; an elastic range as
    torch elastic (``torchrun``). ``backend`` is "nccl" on GPUs, "gloo" on CPU, or "auto": each
    rank picks nccl when it sees a CUDA device, else gloo (one pipeline for GPU clusters and
    CPU laptops). ``timeout``
    bounds every collective (``init_process_group(timeout=...)``): a rank that stalls longer
    fails its peers with a timeout, classified TRANSIENT (retried at once); None keeps
    torch's default (10 minutes for NCCL, 30 for gloo).
    """

    nnodes: int = 1
    nproc_per_node: int = 1
    min_nodes: int | None = None
    backend: str = "nccl"
    max_restarts: int = 0
    timeout: str | float | None = None

    def __post_init__(self) -> None:
        for name in ("nnodes", "nproc_per_node"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PolicyError(f"Torchrun {name}={v!r} must be an integer >= 1")
        if self.min_nodes is not None and not 1 <= self.min_nodes <= self.nnodes:
            raise PolicyError(f"Torchrun min_nodes={self.min_nodes!r} must be between 1 and nnodes={self.nnodes}")
        if self.backend not in ("nccl", "gloo", "mpi", "auto"):
            raise PolicyError(f"Torchrun backend={self.backend!r} must be nccl, gloo, mpi or auto")
        if self.timeout is not None:
            from interlock.core.base.durations import parse_duration

            if parse_duration(self.timeout) <= 0:
                raise PolicyError(f"Torchrun timeout={self.timeout!r} must be positive")

    @property
    def timeout_s(self) -> float | None:
        from interlock.core.base.durations import parse_duration

        return parse_duration(self.timeout) if self.timeout is not None else None

    @property
    def elastic(self) -> bool:
        return self.min_nodes is not None

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if data["timeout"] is None:
            del data["timeout"]  # specs without one stay as they were
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Torchrun:
        return cls(**data)


@dataclass(frozen=True)
class Secret:
    """A reference to a secret the backend injects (Flyte secret request, Kubernetes secret).

    Only the reference is ever compiled: ``group`` (Kubernetes secret name) and ``key``.
    The value reaches the container as environment variable ``env`` (default GROUP_KEY).
    """

    group: str
    key: str
    env: str | None = None

    def __post_init__(self) -> None:
        if not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", self.group):
            raise PolicyError(f"secret group {self.group!r} must be a valid Kubernetes secret name")
        if not self.key:
            raise PolicyError(f"secret {self.group!r}: key must not be empty")

    @property
    def env_var(self) -> str:
        return self.env or re.sub(r"[^A-Z0-9_]", "_", f"{self.group}_{self.key}".upper())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
