"""Step policies as plain, validated data: resources, caching, checkpoints, distribution, secrets.

Retry and Backoff live in ``retry.py``. Every policy validates on construction and raises
``PolicyError`` naming the field and the bad value, so a mistake surfaces where it is
written, not on a cluster an hour later.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from interlock.core.base.errors import PolicyError
from interlock.core.model.policies_opt_in import Toleration

# Kubernetes resource quantities: "500m", "2", "1.5", "2Gi", "512Mi", "1G", "1e3".
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


@dataclass(frozen=True, slots=True)
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

    cpu: str | int | float | None = None  # stored as a string (see _quantity_str)
    memory: str | None = None
    gpu: int = 0
    accelerator: str | None = None
    shared_memory: str | None = None
    ephemeral_storage: str | None = None
    cpu_limit: str | int | float | None = None
    memory_limit: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] | list[Toleration] = ()  # stored as a tuple
    queue: str | None = None
    priority_class: str | None = None

    def __post_init__(self) -> None:
        gpu, accelerator = self.gpu, self.accelerator
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
            "cpu": _quantity_str(self.cpu, "cpu"),
            "memory": _quantity_str(self.memory, "memory"),
            "shared_memory": _quantity_str(self.shared_memory, "shared_memory"),
            "ephemeral_storage": _quantity_str(self.ephemeral_storage, "ephemeral_storage"),
            "cpu_limit": _quantity_str(self.cpu_limit, "cpu_limit"),
            "memory_limit": _quantity_str(self.memory_limit, "memory_limit"),
            "node_selector": dict(self.node_selector or {}),
            "tolerations": _tolerations(self.tolerations),
            "queue": _kueue_name(self.queue, "queue"),
            "priority_class": _kueue_name(self.priority_class, "priority_class"),
        }
        if self.priority_class is not None and self.queue is None:
            raise PolicyError(
                f"priority_class={self.priority_class!r} without a queue: Kueue orders workloads within a queue",
                hint=f'add the queue: Resources(queue="team-a", priority_class={self.priority_class!r})',
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
        # Field by field: tolerations become JSON objects, and empty values are left out.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["node_selector"] = dict(self.node_selector)
        data["tolerations"] = [asdict(t) for t in self.tolerations]
        return {k: v for k, v in data.items() if v not in (None, {}, [], 0)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Resources:
        data = dict(data)
        data["tolerations"] = data.get("tolerations") or []  # dicts: __init__ makes Tolerations
        return cls(**data)


def _tolerations(given: list[Toleration] | tuple[Toleration, ...] | list[dict] | None) -> tuple[Toleration, ...]:
    if not given:
        return ()
    return tuple(t if isinstance(t, Toleration) else Toleration(**t) for t in given)


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
