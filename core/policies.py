"""Step policies as plain, validated data: resources, caching, checkpoints, distribution, secrets.

Retry and Backoff live in ``retry.py``. Every policy validates on construction and raises
``PolicyError`` naming the field and the bad value, so a mistake surfaces where it is
written, not on a cluster an hour later.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .errors import PolicyError

# Kubernetes resource quantities: "500m", "2", "1.5", "2Gi", "512Mi", "1G", "1e3".
# Patterns compile on first use (re caches them): every KFP task imports this module, most
# never check a quantity or a label.
_QUANTITY = r"^(?P<num>[0-9]+(\.[0-9]+)?|\.[0-9]+)(?P<unit>m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]+)?$"
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def parse_quantity(value: str | int | float, field_name: str) -> float:
    """Parse a Kubernetes quantity into a number (cores or bytes); raise PolicyError if invalid."""
    if isinstance(value, bool):
        raise PolicyError(f"{field_name}={value!r} is not a quantity")
    if isinstance(value, int | float):
        if value < 0:
            raise PolicyError(f"{field_name}={value!r} must not be negative")
        return float(value)
    m = re.match(_QUANTITY, str(value).strip())
    if not m:
        raise PolicyError(
            f"{field_name}={value!r} is not a valid Kubernetes quantity",
            hint='write e.g. cpu="500m" or "2", memory="512Mi" or "4Gi"',
        )
    num, unit = float(m.group("num")), m.group("unit")
    if unit is None:
        return num
    if unit.startswith("e"):
        return num * 10 ** int(unit[1:])
    return num * (_BINARY[unit] if unit in _BINARY else _DECIMAL[unit])


def _quantity_str(value: str | int | float | None, field_name: str) -> str | None:
    if value is None:
        return None
    parse_quantity(value, field_name)
    # flytekit fails at serialization on ints (Resources(gpu=2)); keep everything a string.
    return str(value)


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
class Resources:
    """Requests (and optional limits) for one step's container.

    ``gpu`` is a count; ``accelerator`` names the device type (e.g. "nvidia-h200",
    "nvidia-a100-80gb", "nvidia-tesla-t4") and requires a count. Memory limits default to the
    request on backends that take both, so a step is not OOM-killed below what it asked for.

    ``queue`` and ``priority_class`` say whose share of the cluster the resources come from:
    a Kueue ``LocalQueue`` and ``WorkloadPriorityClass``, rendered as the labels
    ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class`` (see ``kueue_labels``).
    They live here, with the requests they are quota for, so that one shared
    ``GPU = il.Resources(gpu=8, queue="team-a")`` carries both.
    """

    cpu: str | None = None
    memory: str | None = None
    gpu: int = 0
    accelerator: str | None = None
    shared_memory: str | None = None
    ephemeral_storage: str | None = None
    cpu_limit: str | None = None
    memory_limit: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    queue: str | None = None
    priority_class: str | None = None

    def __init__(
        self,
        cpu: str | int | float | None = None,
        memory: str | None = None,
        gpu: int = 0,
        accelerator: str | None = None,
        shared_memory: str | None = None,
        ephemeral_storage: str | None = None,
        cpu_limit: str | int | float | None = None,
        memory_limit: str | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[Toleration] | tuple[Toleration, ...] | None = None,
        queue: str | None = None,
        priority_class: str | None = None,
    ) -> None:
        if isinstance(gpu, bool) or not isinstance(gpu, int):
            raise PolicyError(f"gpu={gpu!r} must be a whole number of devices")
        if gpu < 0:
            raise PolicyError(f"gpu={gpu!r} must not be negative")
        if accelerator is not None and gpu == 0:
            raise PolicyError(
                f"accelerator={accelerator!r} without a gpu count",
                hint=f"add gpu=1 (or more): Resources(gpu=1, accelerator={accelerator!r})",
            )
        values: dict[str, Any] = {
            "cpu": _quantity_str(cpu, "cpu"),
            "memory": _quantity_str(memory, "memory"),
            "gpu": gpu,
            "accelerator": accelerator,
            "shared_memory": _quantity_str(shared_memory, "shared_memory"),
            "ephemeral_storage": _quantity_str(ephemeral_storage, "ephemeral_storage"),
            "cpu_limit": _quantity_str(cpu_limit, "cpu_limit"),
            "memory_limit": _quantity_str(memory_limit, "memory_limit"),
            "node_selector": dict(node_selector or {}),
            "tolerations": tuple(
                t if isinstance(t, Toleration) else Toleration(**t) for t in (tolerations or ())
            ),
            "queue": _kueue_name(queue, "queue"),
            "priority_class": _kueue_name(priority_class, "priority_class"),
        }
        if priority_class is not None and queue is None:
            raise PolicyError(
                f"priority_class={priority_class!r} without a queue: Kueue orders workloads within a queue",
                hint=f'add the queue: Resources(queue="team-a", priority_class={priority_class!r})',
            )
        for name in ("cpu", "memory"):
            req, lim = values[name], values[f"{name}_limit"]
            if req is not None and lim is not None and parse_quantity(lim, name) < parse_quantity(req, name):
                raise PolicyError(f"{name}_limit={lim!r} is below the request {name}={req!r}")
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def __hash__(self) -> int:
        return hash(repr(self.to_json()))

    def to_json(self) -> dict[str, Any]:
        # Field by field, not asdict(): every receipt fragment (two per step) records these,
        # and asdict deep-copies each value; the values are strings, numbers and one flat dict.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["node_selector"] = dict(self.node_selector)
        data["tolerations"] = [asdict(t) for t in self.tolerations]
        return {k: v for k, v in data.items() if v not in (None, {}, [], 0)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Resources:
        data = dict(data)
        data["tolerations"] = [Toleration(**t) for t in data.get("tolerations", [])]
        return cls(**data)


KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_KUEUE_NAME = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"


def _kueue_name(value: str | None, field_name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not re.match(_KUEUE_NAME, value)):
        raise PolicyError(
            f"{field_name}={value!r} is not a Kueue object name",
            hint="lowercase letters, digits, '-' and '.', at most 63 characters (it becomes a label value)",
        )
    return value


def kueue_labels(r: Resources) -> dict[str, str]:
    """The labels by which Kueue admits a workload: on a pod, or on a whole job (one gang)."""
    labels = {KUEUE_QUEUE_LABEL: r.queue} if r.queue else {}
    if r.priority_class:
        labels[KUEUE_PRIORITY_LABEL] = r.priority_class
    return labels


@dataclass(frozen=True)
class Cache:
    """Cache a step's outputs by (code fingerprint, input values, input artifact content).

    ``version`` is an explicit bump on top of the automatic source fingerprint;
    ``ignore_inputs`` names inputs that must not affect the key (e.g. a log level).
    A failed step never writes a cache entry.
    """

    version: str | None = None
    enabled: bool = True
    ignore_inputs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "enabled": self.enabled, "ignore_inputs": list(self.ignore_inputs)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cache:
        return cls(data.get("version"), data.get("enabled", True), tuple(data.get("ignore_inputs", ())))


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
        from .durations import parse_duration

        parse_duration(self.every)
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 1:
            raise PolicyError(f"CheckpointPolicy keep={self.keep!r} must be an integer >= 1")

    @property
    def every_s(self) -> float:
        from .durations import parse_duration

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
            from .durations import parse_duration

            if parse_duration(self.timeout) <= 0:
                raise PolicyError(f"Torchrun timeout={self.timeout!r} must be positive")

    @property
    def timeout_s(self) -> float | None:
        from .durations import parse_duration

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


_LABEL_KEY = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
_LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"


def check_labels(labels: dict[str, str], what: str = "label") -> dict[str, str]:
    """Labels feed cost allocation on Kubernetes; refuse ones the API server would reject."""
    for k, v in labels.items():
        if not isinstance(k, str) or not re.match(_LABEL_KEY, k):
            raise PolicyError(f"{what} key {k!r} is not a valid Kubernetes label key")
        if not isinstance(v, str) or not re.match(_LABEL_VALUE, v):
            raise PolicyError(
                f"{what} {k}={v!r} is not a valid Kubernetes label value",
                hint="at most 63 characters: letters, digits, '-', '_', '.'; start and end alphanumeric",
            )
    return dict(labels)
