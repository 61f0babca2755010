"""Finding plugins: one helper for every entry-point group interlock reads.

A plugin is an entry point in one of the groups below, loaded by name only when it is
used. A missing or broken plugin fails the same way in every group: the names that are
installed, or the extra that would make it importable. Core never imports a plugin.

    backends.get_backend("flyte")         group interlock.backends
    checkpoint.store_for_uri("s3://b/p")  group interlock.checkpoint_stores (by URI scheme)
    lineage.lineage_provider()            group interlock.lineage
    run.exporters.configured()            group interlock.metrics (INTERLOCK_PUSHGATEWAY...)
    watch.listing.lister_for("s3://b/p")  group interlock.object_listers (by URI scheme)
    watch.drift.drift_statistic()         group interlock.drift
    watch.drift.registry_for("mlflow")    group interlock.registries

Tests and notebooks can add a plugin in-process with ``register`` (or by editing the dict
that ``registry(group)`` returns); a registered object wins over an entry point of the
same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlock.core.base.errors import (
    BackendNotFound,
    CheckpointError,
    InterlockError,
    LineageUnavailable,
    MetricsUnavailable,
    WatchError,
)

__all__ = [
    "BACKENDS",
    "CHECKPOINT_STORES",
    "LINEAGE",
    "METRICS",
    "OBJECT_LISTERS",
    "DRIFT",
    "REGISTRIES",
    "PluginGroup",
    "installed",
    "create",
    "load",
    "register",
    "registry",
]


@dataclass(frozen=True)
class PluginGroup:
    """One entry-point group and how its errors read."""

    entry_point: str  # the entry-point group name
    noun: str  # what one plugin of the group is called: "backend"
    error: type[InterlockError]  # raised when a plugin is missing, broken or of the wrong kind
    unknown: str  # the message for a name nobody provides; ``{name}`` is the name asked for
    install_hint: str  # which extras ship plugins of this group

    def extra_of(self, name: str) -> str:
        """The extra that ships plugin ``name``: named like it, up to its first '-'
        (``flyte-local`` comes with ``interlock[flyte]``)."""
        return name.split("-", 1)[0]


BACKENDS = PluginGroup(
    "interlock.backends", "backend", BackendNotFound, "unknown backend {name!r}",
    "adapters ship as extras: pip install 'interlock[flyte]' or 'interlock[kfp]'",
)
CHECKPOINT_STORES = PluginGroup(
    "interlock.checkpoint_stores", "checkpoint store", CheckpointError,
    "no checkpoint store for {name}:// URIs",
    "install the plugin that provides it, e.g. pip install 'interlock[s3]'",
)
LINEAGE = PluginGroup(
    "interlock.lineage", "lineage provider", LineageUnavailable, "no lineage provider {name!r}",
    "lineage plugins register under the entry point group interlock.lineage (docs/lineage.md)",
)

METRICS = PluginGroup(
    "interlock.metrics", "metrics exporter", MetricsUnavailable, "no metrics exporter {name!r}",
    "the Prometheus exporters come with pip install 'interlock[prometheus]' (docs/metrics.md)",
)

OBJECT_LISTERS = PluginGroup(
    "interlock.object_listers", "object lister", WatchError, "no object lister for {name}:// URIs",
    "install the plugin that lists them, e.g. pip install 'interlock[s3]' (docs/triggers.md)",
)
DRIFT = PluginGroup(
    "interlock.drift", "drift statistic", WatchError, "no drift statistic {name!r}",
    "il.OnDrift needs one: pip install 'interlock[drift]' (docs/triggers.md)",
)
REGISTRIES = PluginGroup(
    "interlock.registries", "model registry", WatchError, "no model registry {name!r}",
    "il.OnDrift reads the champion's training data from one: pip install 'interlock[mlflow]'",
)

_registered: dict[str, dict[str, Any]] = {}


def registry(group: PluginGroup) -> dict[str, Any]:
    """The in-process plugins of ``group`` by name (a live dict: tests may patch it)."""
    return _registered.setdefault(group.entry_point, {})


def register(group: PluginGroup, name: str, target: Any) -> None:
    """Add a plugin in-process (tests, notebooks); entry points are the normal route."""
    registry(group)[name] = target


def installed(group: PluginGroup) -> dict[str, Any]:
    """Every plugin of ``group`` by name, sorted: entry points, then in-process ones over them."""
    found: dict[str, Any] = dict(_entry_points(group.entry_point))
    found.update(registry(group))
    return dict(sorted(found.items()))


# Reading entry points scans every installed distribution (5-60 ms), whichever group is asked
# for; a run asks for two or three groups (its backend, the lineage provider, a checkpoint
# store). So one scan serves every group, and it is kept while no folder on sys.path changed:
# installing or removing a package changes its site-packages folder's mtime.
_scanned_under: tuple[tuple[str, int], ...] | None = None  # sys.path's folders and mtimes at the scan
_scanned: Any = None  # every installed entry point (importlib.metadata's EntryPoints)
_by_group: dict[str, tuple[tuple[str, Any], ...]] = {}


def _entry_points(group: str) -> tuple[tuple[str, Any], ...]:
    import os
    import sys

    global _scanned_under, _scanned

    def stamp(path: str) -> int:
        try:
            return os.stat(path or ".").st_mtime_ns
        except OSError:
            return -1

    paths = tuple((p, stamp(p)) for p in sys.path)
    if paths != _scanned_under:
        from importlib.metadata import entry_points  # not at import time: it costs ~40 ms

        _scanned, _scanned_under = entry_points(), paths  # every group: ``select`` only filters
        _by_group.clear()
    if group not in _by_group:
        _by_group[group] = tuple((ep.name, ep) for ep in _scanned.select(group=group))
    return _by_group[group]


def load(group: PluginGroup, name: str) -> Any:
    """The object plugin ``name`` of ``group`` names (a class or a factory), imported now.

    Raises ``group.error`` listing the installed names when there is no such plugin, and
    naming the extra to install when it is there but cannot be imported.
    """
    found = installed(group)
    if name not in found:
        raise group.error(
            f"{group.unknown.format(name=name)}; installed: {', '.join(found) or 'none'}",
            hint=group.install_hint,
        )
    target = found[name]
    if not hasattr(target, "load"):  # registered in-process: already the object itself
        return target
    try:
        return target.load()
    except ImportError as exc:
        owner = getattr(getattr(target, "dist", None), "name", None) or "interlock"
        raise group.error(
            f"{group.noun} {name!r} is registered but cannot be imported: {exc}",
            hint=f"install its extra: pip install 'interlock[{group.extra_of(name)}]'"
            if owner == "interlock"
            else f"install the dependencies of {owner!r}: pip install '{owner}'",
        ) from exc


def create(group: PluginGroup, name: str, kinds: type | tuple[type, ...], protocol: str) -> Any:
    """Load plugin ``name``, call it (a class or factory) and check that the result is one
    of ``kinds`` (runtime-checkable Protocols), else raise ``group.error`` naming ``protocol``."""
    target = load(group, name)
    made = target() if callable(target) else target
    if not isinstance(made, kinds):
        raise group.error(
            f"{group.noun} {name!r} does not implement the {protocol} protocol",
            hint="its entry point must name a class or factory of one; after an upgrade that moved "
            "it, reinstall the package so that its entry points are current",
        )
    return made
