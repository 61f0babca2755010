"""ML Metadata lineage: record runs with KFP's own MLMD types and query them upstream.

The official ml-metadata library needs protobuf<5 (kfp needs >=6), so it runs in its own
venv (``setup_env`` / ``interlock lineage --setup``) behind a JSON-lines worker process.
``MlmdLineage`` is core's LineageProvider (entry point ``mlmd``, group ``interlock.lineage``).
"""

from .client import (
    DEFAULT_GRPC_PORT,
    PYTHON_ENV_VAR,
    LineageStore,
    RecordResult,
    default_env_dir,
    resolve_python,
)
from .errors import (
    LineageConnectionError,
    LineageInputError,
    LineageNotFound,
    LineageStoreError,
    MlmdUnavailable,
)
from .model import ArtifactNode, ExecutionNode, LineageChain, RunInfo, RunSummary
from .provider import MlmdLineage, store_path
from .render import format_chain, lineage_command
from .venv_setup import MLMD_REQUIREMENT, setup_env

__all__ = [
    "DEFAULT_GRPC_PORT",
    "MLMD_REQUIREMENT",
    "PYTHON_ENV_VAR",
    "ArtifactNode",
    "ExecutionNode",
    "LineageChain",
    "LineageConnectionError",
    "LineageInputError",
    "LineageNotFound",
    "LineageStore",
    "LineageStoreError",
    "MlmdLineage",
    "MlmdUnavailable",
    "RecordResult",
    "RunInfo",
    "RunSummary",
    "default_env_dir",
    "format_chain",
    "lineage_command",
    "resolve_python",
    "setup_env",
    "store_path",
]
