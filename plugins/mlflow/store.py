"""Where MLflow data goes, and how MLflow's exceptions become interlock errors.

Precedence: an explicit ``tracking_uri``, then ``MLFLOW_TRACKING_URI``, then a SQLite store
under ``tracking_dir`` (``<dir>/mlflow.db``). With a SQLite URI, new experiments keep their
artifacts in ``mlartifacts/`` next to the database file. With none of the three we refuse
rather than fall back to MLflow's ``./mlruns`` default.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from interlock.core.base.errors import InterlockError

DB_NAME = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"
LOCK_SUFFIX = ".lock"  # mlflow.db.lock, next to the database

# MLflow error codes worth retrying: the server was busy or briefly away.
_RETRYABLE_CODES = {
    "TEMPORARILY_UNAVAILABLE",
    "REQUEST_LIMIT_EXCEEDED",
    "DEADLINE_EXCEEDED",
    "ABORTED",
    "INTERNAL_ERROR",
}


class MlflowError(InterlockError):
    """MLflow refused or failed an operation. ``mlflow_code`` is MLflow's own error code."""

    code = "MLFLOW"

    def __init__(
        self,
        message: str,
        *,
        mlflow_code: str | None = None,
        retryable: bool = False,
        hint: str | None = None,
    ) -> None:
        self.mlflow_code = mlflow_code
        self.retryable = retryable
        super().__init__(message, hint=hint)


class RegistryError(MlflowError):
    """A model-registry operation failed (unknown model, version or alias...)."""

    code = "MLFLOW_REGISTRY"


@contextmanager
def wrapped(what: str, *, error: type[MlflowError] = MlflowError) -> Iterator[None]:
    """Re-raise MLflow (and connection) exceptions as ``error``, naming ``what`` was being done."""
    from mlflow.exceptions import MlflowException

    try:
        yield
    except InterlockError:
        raise
    except MlflowException as exc:
        code = getattr(exc, "error_code", None)
        hint = None
        if code == "RESOURCE_DOES_NOT_EXIST":
            hint = "check the model name and version; list them with MlflowClient().search_model_versions()"
        raise error(
            f"{what}: {exc.message if hasattr(exc, 'message') else exc}",
            mlflow_code=code,
            retryable=code in _RETRYABLE_CODES,
            hint=hint,
        ) from exc
    except (ConnectionError, TimeoutError) as exc:
        raise error(f"{what}: {exc}", retryable=True) from exc


@dataclass(frozen=True)
class Store:
    tracking_uri: str
    registry_uri: str
    # Where new experiments keep artifacts; None lets the tracking server decide.
    artifact_root: str | None
    # File locks next to a SQLite database (``mlflow.db.lock``): the registry's serialises
    # promotions, both serialise first use (schema migrations). None for a store no local
    # file can guard (a tracking server, a shared database).
    lock_path: Path | None = None
    tracking_lock_path: Path | None = None


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :]
    return None if path in ("", ":memory:") else Path(path)


def resolve_store(
    tracking_dir: str | os.PathLike[str] | None = None, tracking_uri: str | None = None
) -> Store:
    """Decide the tracking/registry URIs and the artifact root (see the module docstring)."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
    if uri is None:
        if tracking_dir is None:
            raise MlflowError(
                "no MLflow store configured",
                hint="pass tracking_dir=... (a local SQLite store) or tracking_uri=..., "
                "or set MLFLOW_TRACKING_URI",
            )
        base = Path(tracking_dir).resolve()
        base.mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{base / DB_NAME}"
    db = _sqlite_path(uri)
    # Artifacts sit next to a SQLite database; any other store (a tracking server, another
    # database) keeps its own artifact configuration.
    root = db.resolve().parent / ARTIFACTS_DIR if db is not None else None
    registry = (os.environ.get("MLFLOW_REGISTRY_URI") if tracking_uri is None else None) or uri
    return Store(uri, registry, root.as_uri() if root else None, _lock_for(registry), _lock_for(uri))


def _lock_for(uri: str) -> Path | None:
    db = _sqlite_path(uri)
    if db is None:
        return None
    db = db.resolve()
    return db.with_name(db.name + LOCK_SUFFIX)
