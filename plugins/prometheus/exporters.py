"""The two ways out: a Pushgateway (a batch job's metrics, pushed as each step ends) and
node_exporter's textfile collector (files a node's exporter serves on its next scrape)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import push_to_gateway, write_to_textfile

from interlock.core.base.errors import MetricsUnavailable
from interlock.core.run.exporters import PUSHGATEWAY_ENV, TEXTFILE_ENV, StepExport
from interlock.plugins.prometheus.samples import registry_of, run_samples, step_samples

JOB = "interlock"
PUSH_TIMEOUT_S = 5.0  # a gateway that does not answer costs a step this much, once


class PushgatewayExporter:
    """Pushes each step's samples to the group {job="interlock", pipeline, run_id, node} and
    the run's to {job, pipeline, run_id} (PUT: a backend retry of a node replaces its group).
    Groups stay until deleted: see docs/metrics.md for the clean-up a platform team runs."""

    def __init__(self, target: str) -> None:
        if not re.fullmatch(r"(https?://)?[\w.\-\[\]:]+(:\d+)?(/[\w./\-]*)?", target):
            raise MetricsUnavailable(f"{PUSHGATEWAY_ENV}={target!r} is not host:port or a URL",
                                     hint=f"{PUSHGATEWAY_ENV}=pushgateway.monitoring:9091")
        self.target = target

    def step_finished(self, event: StepExport) -> None:
        key = {"pipeline": event.pipeline, "run_id": event.run_id, "node": event.fragment.node}
        push_to_gateway(self.target, JOB, registry_of(step_samples(event)), grouping_key=key, timeout=PUSH_TIMEOUT_S)

    def run_finished(self, receipt: Mapping[str, Any]) -> None:
        key = {"pipeline": str(receipt.get("pipeline")), "run_id": str(receipt.get("run_id"))}
        push_to_gateway(self.target, JOB, registry_of(run_samples(receipt)), grouping_key=key, timeout=PUSH_TIMEOUT_S)


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


class TextfileExporter:
    """Writes ``interlock_<pipeline>_<node>.prom`` per node and ``interlock_<pipeline>.prom``
    per run into the collector's directory, atomically (each file holds the latest run)."""

    def __init__(self, target: str) -> None:
        path = Path(target)
        if not path.is_dir():
            raise MetricsUnavailable(f"{TEXTFILE_ENV}={target!r} is not a directory",
                                     hint="point it at node_exporter's --collector.textfile.directory")
        self.target = os.fspath(path)

    def step_finished(self, event: StepExport) -> None:
        name = f"interlock_{_file_part(event.pipeline)}_{_file_part(event.fragment.node)}.prom"
        write_to_textfile(os.path.join(self.target, name), registry_of(step_samples(event, node_label=True)))

    def run_finished(self, receipt: Mapping[str, Any]) -> None:
        name = f"interlock_{_file_part(str(receipt.get('pipeline')))}.prom"
        write_to_textfile(os.path.join(self.target, name), registry_of(run_samples(receipt)))
