"""What one push carries: the samples of a step that just ended, or of a run's receipt, and
the registry that exposes them.

Labels: ``pipeline``, ``step``, ``backend``, ``status``, the step's Kueue ``queue`` and its
own labels (``il.Resources(labels={"team": "fraud"})`` -> ``team="fraud"``; a name
Prometheus refuses is rewritten, ``cost-center`` -> ``cost_center``). Never a run id: it is
in the Pushgateway's grouping key (``run_id``, and ``node`` for a step), not on a series
a textfile keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from interlock.core.base.status import Status
from interlock.core.record.efficiency import step_gpu_time
from interlock.core.record.receipt import PriceTable, attempts_usage
from interlock.core.run.devices import billed_gpus
from interlock.core.run.exporters import StepExport
from interlock.plugins.prometheus.families import RUN, STEP, Family

_OURS = {"pipeline", "step", "backend", "status", "queue", "node", "kind", "use", "outcome", "run_id", "job"}
_BAD = re.compile(r"[^a-zA-Z0-9_]")


@dataclass(frozen=True)
class Sample:
    family: Family
    labels: dict[str, str]
    value: float


def label_name(key: str) -> str:
    """A Kubernetes-style label key as a Prometheus label name (``cost-center`` -> ``cost_center``)."""
    name = _BAD.sub("_", key.rsplit("/", 1)[-1])
    return f"_{name}" if name[:1].isdigit() else name


def own_labels(labels: Mapping[str, str], queue: str | None) -> dict[str, str]:
    out = {label_name(k): str(v) for k, v in sorted(labels.items()) if label_name(k) not in _OURS}
    if queue:
        out["queue"] = queue
    return out


def _family(name: str, group: tuple[Family, ...]) -> Family:
    return next(f for f in group if f.name == name)


def step_samples(event: StepExport, *, node_label: bool = False) -> list[Sample]:
    frag, step = event.fragment, event.step
    labels = {"pipeline": event.pipeline, "step": step.name, "backend": event.backend, "status": str(frag.status),
              **own_labels(dict(step.labels), step.resources.queue)}
    if node_label:
        labels["node"] = frag.node
    attempts = [a.to_dict() for a in frag.attempts]
    cached = frag.status is Status.CACHED
    gpus = 0 if cached else billed_gpus(step.gpus, frag.device)
    wall = sum(a["duration_s"] for a in attempts)
    gpu = step_gpu_time(attempts, gpus)
    cost = PriceTable.load().estimate(step.resources.to_json(), wall, gpus=gpus, interruptible=step.interruptible,
                                      nodes=step.nodes)
    used = attempts_usage(attempts)  # the receipt's own sums
    values: dict[str, float] = {
        "interlock_step_duration_seconds": wall,
        "interlock_step_gpu_seconds": gpu.billed,
        "interlock_step_data_wait_seconds": used["data_wait_s"],
        "interlock_step_checkpoint_seconds": used["checkpoint_s"],
        "interlock_step_checkpoints_total": float(used["checkpoints"]),
        "interlock_step_estimated_cost_usd": cost,
        "interlock_step_end_timestamp_seconds": frag.ended,
    }
    if gpu.billed > 0:
        values["interlock_step_gpu_busy_seconds"] = gpu.busy
        values["interlock_step_gpu_efficiency_ratio"] = gpu.ratio or 0.0
    if "gpu_utilization" in used:
        values["interlock_step_gpu_utilization_ratio"] = used["gpu_utilization"]
    out = [Sample(_family(name, STEP), labels, value) for name, value in values.items()]
    kinds: dict[str, int] = {}
    for a in attempts:
        kind = str((a.get("failure") or {}).get("kind") or "none").lower()
        kinds[kind] = kinds.get(kind, 0) + 1
    out += [Sample(_family("interlock_step_attempts_total", STEP), {**labels, "kind": k}, float(n))
            for k, n in sorted(kinds.items())]
    return out


def _shared_labels(steps: list[Mapping[str, Any]]) -> dict[str, str]:
    """The labels every step of the run carries with one value (a pipeline's team)."""
    sets = [own_labels(s.get("labels") or {}, (s.get("resources") or {}).get("queue")) for s in steps]
    if not sets:
        return {}
    first = sets[0]
    return {k: v for k, v in first.items() if all(s.get(k) == v for s in sets[1:])}


def run_samples(receipt: Mapping[str, Any]) -> list[Sample]:
    steps = list(receipt.get("steps") or [])
    labels = {"pipeline": str(receipt.get("pipeline")), "backend": str(receipt.get("backend")),
              "status": str(receipt.get("status")), **_shared_labels(steps)}
    totals = receipt.get("totals") or {}
    eff = totals.get("gpu_efficiency") or {}
    started, ended = receipt.get("started"), receipt.get("ended")
    values: dict[str, float] = {
        "interlock_run_duration_seconds": float(ended) - float(started) if started and ended else 0.0,
        "interlock_run_gpu_seconds": float(totals.get("gpu_seconds", 0.0)),
        "interlock_run_data_wait_seconds": float(totals.get("data_wait_s", 0.0)),
        "interlock_run_checkpoint_seconds": float(totals.get("checkpoint_s", 0.0)),
        "interlock_run_estimated_cost_usd": float(totals.get("estimated_cost_usd", 0.0)),
        "interlock_run_end_timestamp_seconds": float(ended or 0.0),
    }
    if eff:
        values["interlock_run_gpu_busy_seconds"] = float(eff.get("busy_gpu_s", 0.0))
        values["interlock_run_gpu_efficiency_ratio"] = float(eff["ratio"])
    out = [Sample(_family(name, RUN), labels, value) for name, value in values.items()]
    for use, share in sorted((eff.get("rest") or {}).items()):
        out.append(Sample(_family("interlock_run_gpu_time_ratio", RUN), {**labels, "use": use}, float(share)))
    if eff:
        out.append(Sample(_family("interlock_run_gpu_time_ratio", RUN), {**labels, "use": "busy"}, float(eff["ratio"])))
    outcomes: dict[str, int] = {}
    for s in steps:
        outcomes[str(s.get("status"))] = outcomes.get(str(s.get("status")), 0) + 1
    out += [Sample(_family("interlock_run_steps", RUN), {**labels, "outcome": k}, float(n))
            for k, n in sorted(outcomes.items())]
    return out


class _Samples(Collector):
    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def collect(self) -> Iterator[Any]:
        by_family: dict[str, list[Sample]] = {}
        for s in self.samples:
            by_family.setdefault(s.family.name, []).append(s)
        for name, group in by_family.items():
            family = group[0].family
            names = list(group[0].labels)
            if family.kind == "counter":
                metric: Any = CounterMetricFamily(name.removesuffix("_total"), family.help, labels=names)
            else:
                metric = GaugeMetricFamily(name, family.help, labels=names)
            for s in group:
                metric.add_metric([s.labels[n] for n in names], s.value)
            yield metric


def registry_of(samples: list[Sample]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Samples(samples))
    return registry
