"""``MlmdLineage``: the mlmd plugin behind core's LineageProvider seam.

Registered as entry point ``mlmd`` in group ``interlock.lineage``. Runs are recorded in an
ML Metadata SQLite store per work directory (``$INTERLOCK_MLMD_SQLITE``, else
``WORKDIR/lineage/mlmd.sqlite``); ``interlock lineage`` can also query a cluster's metadata
gRPC service (``--host/--port``) and create the ml-metadata venv (``--setup [--env DIR]``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .client import LineageStore
from .errors import LineageInputError
from .render import lineage_command
from .venv_setup import setup_env

SQLITE_ENV = "INTERLOCK_MLMD_SQLITE"


def store_path(workdir: str | os.PathLike[str]) -> Path:
    """Where runs of ``workdir`` are recorded: ``$INTERLOCK_MLMD_SQLITE``, else
    ``WORKDIR/lineage/mlmd.sqlite``."""
    explicit = os.environ.get(SQLITE_ENV)
    return Path(explicit) if explicit else Path(workdir) / "lineage" / "mlmd.sqlite"


class MlmdLineage:
    """Lineage in ML Metadata, through the official library in its own interpreter."""

    name = "mlmd"
    title = "ML Metadata"

    def record_run(self, run: Mapping[str, Any], *, workdir: Path) -> str:
        path = store_path(workdir)
        with LineageStore(sqlite_path=path) as store:  # MlmdUnavailable when not set up
            store.record_run(dict(run))
        return str(path)

    def upstream(self, target: str, *, workdir: Path) -> str:
        return lineage_command(target, sqlite=str(store_path(workdir)))

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--sqlite", help=f"MLMD SQLite file (default: ${SQLITE_ENV}, else WORKDIR/lineage/mlmd.sqlite)")
        parser.add_argument("--host", help="a cluster's metadata gRPC host")
        parser.add_argument("--port", type=int, default=None)
        parser.add_argument("--setup", action="store_true", help="create the ml-metadata virtualenv")
        parser.add_argument("--env", default=None, help="with --setup: where to create it")

    def run_cli(self, args: argparse.Namespace) -> str:
        if args.setup:
            return setup_env(args.env)
        if not args.target:
            raise LineageInputError("lineage needs a MODEL_URI or RUN_ID (or --setup)")
        sqlite = args.sqlite
        if sqlite is None and args.host is None:
            sqlite = str(store_path(args.workdir))
        return lineage_command(args.target, sqlite=sqlite, host=args.host, port=args.port)
