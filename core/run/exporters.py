"""The metrics seam: exporters that see each step as it ends and each run's receipt.

Off by default. One setting turns an exporter on, in the environment of the process that
runs the steps (a pod's env on a cluster; ``il.run(..., pushgateway=...)`` and ``interlock
run --pushgateway`` set it for the run and the processes it starts):

    INTERLOCK_PUSHGATEWAY=host:port        push to a Prometheus Pushgateway (batch jobs)
    INTERLOCK_METRICS_TEXTFILE=DIRECTORY   write node_exporter textfile-collector files

Each names a plugin of the entry-point group ``interlock.metrics`` (the Prometheus plugin,
``interlock[prometheus]``). The shim calls ``step_finished`` after it wrote a node's
fragment; the receipt's writer calls ``run_finished``. An exporter that fails never fails
a step or a run: one warning per process says what it could not send.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from interlock.core.base.errors import InterlockError
from interlock.core.base.plugins import METRICS, load

if TYPE_CHECKING:
    from interlock.core.model.spec import StepSpec
    from interlock.core.run.records import Fragment

log = logging.getLogger("interlock.metrics")

PUSHGATEWAY_ENV = "INTERLOCK_PUSHGATEWAY"
TEXTFILE_ENV = "INTERLOCK_METRICS_TEXTFILE"
SETTINGS = {PUSHGATEWAY_ENV: "prometheus-pushgateway", TEXTFILE_ENV: "prometheus-textfile"}


@dataclass(frozen=True)
class StepExport:
    """A node that just ended, as its fragment records it."""

    pipeline: str
    run_id: str
    backend: str
    step: StepSpec
    fragment: Fragment


@runtime_checkable
class MetricsExporter(Protocol):
    target: str  # where it sends: host:port, a directory

    def step_finished(self, event: StepExport) -> None: ...

    def run_finished(self, receipt: Mapping[str, Any]) -> None: ...


_made: dict[tuple[str, str], MetricsExporter] = {}
_warned: set[str] = set()


def configured() -> list[MetricsExporter]:
    """The exporters the environment turns on now (none: an empty list, no import)."""
    found: list[MetricsExporter] = []
    for env, name in SETTINGS.items():
        target = os.environ.get(env, "").strip()
        if not target:
            continue
        key = (name, target)
        if key not in _made:
            exporter = load(METRICS, name)(target)  # a class or factory taking the setting's value
            if not isinstance(exporter, MetricsExporter):
                raise METRICS.error(f"metrics exporter {name!r} does not implement the MetricsExporter protocol")
            _made[key] = exporter
        found.append(_made[key])
    return found


def check_settings() -> None:
    """Fail now, before a step runs, when a setting names an exporter that cannot load."""
    configured()


def _safely(run_id: str, what: str, call: str, *args: Any) -> None:
    try:
        exporters = configured()
    except InterlockError as exc:
        _warn_once(run_id, f"metrics are not exported: {exc}")
        return
    for exporter in exporters:
        try:
            getattr(exporter, call)(*args)
        except Exception as exc:  # noqa: BLE001 - metrics never fail training
            _warn_once(f"{run_id} {exporter.target}", f"could not export {what} metrics to {exporter.target}: {exc}")


def _warn_once(key: str, message: str) -> None:
    """One warning per run and target: a gateway that is down is said once, not per step."""
    if key not in _warned:
        _warned.add(key)
        log.warning("%s", message)


def export_step(pipeline: str, run_id: str, backend: str, step: StepSpec, fragment: Fragment) -> None:
    if any(os.environ.get(env) for env in SETTINGS):
        _safely(run_id, "step", "step_finished", StepExport(pipeline, run_id, backend, step, fragment))


def export_run(receipt: Mapping[str, Any]) -> None:
    if any(os.environ.get(env) for env in SETTINGS):
        _safely(str(receipt.get("run_id")), "run", "run_finished", receipt)


@contextmanager
def exporting(pushgateway: str | None = None, textfile: str | None = None) -> Iterator[None]:
    """Turn exporters on for a run (``il.run(..., pushgateway=...)``): the settings go into
    this process's environment, which the processes the run starts inherit, and back out
    afterwards. Checks every setting first, so a typo fails before any step runs."""
    given = {PUSHGATEWAY_ENV: pushgateway, TEXTFILE_ENV: textfile}
    before = {env: os.environ.get(env) for env, value in given.items() if value}
    for env, value in given.items():
        if value:
            os.environ[env] = value
    try:
        check_settings()
        yield
    finally:
        for env, old in before.items():
            if old is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = old
