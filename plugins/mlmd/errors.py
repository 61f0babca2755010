"""Errors of the lineage plugin; all are InterlockErrors with a stable ``code``."""

from __future__ import annotations

from interlock.core.base.errors import InterlockError, LineageUnavailable

SETUP_COMMAND = "interlock lineage --setup"


class MlmdUnavailable(LineageUnavailable):
    """No interpreter with ml-metadata: the lineage venv was never created or is broken."""

    code = "MLMD_UNAVAILABLE"


class LineageConnectionError(InterlockError):
    """The metadata store cannot be reached (gRPC service down, wrong host/port)."""

    code = "MLMD_CONNECTION"
    retryable = True


class LineageNotFound(InterlockError):
    """No artifact with that URI, or no run with that id, in the store."""

    code = "LINEAGE_NOT_FOUND"


class LineageInputError(InterlockError):
    """The run record handed to ``record_run`` is malformed."""

    code = "LINEAGE_INPUT"


class LineageStoreError(InterlockError):
    """ML Metadata failed, or the worker process died."""

    code = "MLMD"
