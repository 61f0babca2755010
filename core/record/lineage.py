"""The lineage seam: a small Protocol that a lineage plugin implements.

A provider records runs and answers "where did this model come from?". It is found through
the ``interlock.lineage`` entry points (interlock's own plugin records in KFP's metadata store), and it
brings its own ``interlock lineage`` options (where its store lives, how to set it up):
core names no provider, no store and no flag of one.

A run record is plain JSON-able data::

    {"pipeline": str, "run_id": str, "backend": str, "git_sha": str | None,
     "git_dirty": bool | None, "parameters": {...},
     "steps": [{"name": str, "state": "COMPLETE" | "FAILED", "cached": bool,
                "image": str | None, "image_digest": str | None, "fingerprint": str,
                "snapshots": [str], "started": float, "ended": float, "attempts": int,
                "failure_kind": str | None,
                "inputs":  [{"name": port, "uri": str, "type": "system.Dataset"}],
                "outputs": [{"name": port, "uri": str, "type": "system.Model", "properties": {}}]}]}

Artifact types use KFP's own names (system.Dataset, system.Model, system.Metrics...).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from interlock.core.base import plugins
from interlock.core.base.errors import LineageUnavailable

if TYPE_CHECKING:
    import argparse

__all__ = ["PROVIDER_ENV", "LineageProvider", "lineage_provider"]

PROVIDER_ENV = "INTERLOCK_LINEAGE"  # which provider, when more than one is installed


@runtime_checkable
class LineageProvider(Protocol):
    name: str  # its entry-point name
    title: str  # what people call its store, for messages ("<title> not configured")

    def record_run(self, run: Mapping[str, Any], *, workdir: Path) -> str:
        """Record one run (the record above) in the provider's store for ``workdir``;
        returns where it was recorded. Raises LineageUnavailable when it is not set up."""
        ...

    def upstream(self, target: str, *, workdir: Path) -> str:
        """What produced ``target`` (a model URI or a run id), as readable text, from the
        provider's store for ``workdir``."""
        ...

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        """Add the provider's own options to ``interlock lineage`` (core adds TARGET and
        --workdir)."""
        ...

    def run_cli(self, args: argparse.Namespace) -> str:
        """Carry out ``interlock lineage`` with the parsed arguments (``args.target`` may be
        None, ``args.workdir`` is a Path); returns what to print."""
        ...


def lineage_provider(name: str | None = None) -> LineageProvider:
    """The lineage provider ``name``; by default ``$INTERLOCK_LINEAGE``, else the one installed.

    Raises LineageUnavailable when none is installed, when several are and none was chosen,
    or when the chosen one cannot be imported.
    """
    name = name or os.environ.get(PROVIDER_ENV) or None
    if name is None:
        installed = list(plugins.installed(plugins.LINEAGE))
        if not installed:
            raise LineageUnavailable(
                f"no lineage provider installed (entry point group {plugins.LINEAGE.entry_point})",
                hint=plugins.LINEAGE.install_hint,
            )
        if len(installed) > 1:
            raise LineageUnavailable(
                f"several lineage providers are installed ({', '.join(installed)})",
                hint=f"choose one with ${PROVIDER_ENV}",
            )
        [name] = installed
    provider: LineageProvider = plugins.create(plugins.LINEAGE, name, LineageProvider, "LineageProvider")
    return provider
