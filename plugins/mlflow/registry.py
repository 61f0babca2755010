"""MLflow tracking and model registry for interlock pipelines, on ``mlflow.MlflowClient``.

Promotion uses registry aliases only (stages are deprecated):
- ``champion``: the version serving now;
- ``previous-champion``: the version ``promote`` replaced, kept for ``rollback``;
- ``challenger``: a candidate under evaluation (``set_challenger``).
No version is ever deleted or archived by a promotion. ``mlflow`` is imported inside the
methods so that importing this module stays cheap.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .store import MlflowError, RegistryError, Store, resolve_store, wrapped
from .tags import filter_secrets, is_secret, receipt_tags, redact

CHAMPION = "champion"
PREVIOUS_CHAMPION = "previous-champion"
CHALLENGER = "challenger"
RECEIPT_ARTIFACT = "receipt.json"
_MAX_PARAM_VALUE = 6000  # MLflow's limit on a param value


@runtime_checkable
class ModelRegistry(Protocol):
    """What a pipeline step needs from a model registry."""

    def champion(self, model_name: str) -> str | None: ...

    def register(
        self,
        model_name: str,
        source: Any,
        *,
        run_id: str | None = None,
        tags: Mapping[str, Any] | None = None,
        receipt: Mapping[str, Any] | None = None,
        gpu: Mapping[str, Any] | None = None,
    ) -> str: ...

    def promote(self, model_name: str, version: str | int) -> str | None: ...

    def set_challenger(self, model_name: str, version: str | int) -> None: ...


@dataclass(frozen=True)
class ModelVersionInfo:
    name: str
    version: str
    source: str
    run_id: str | None
    status: str
    tags: dict[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()


def _flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in values.items():
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            v = dataclasses.asdict(v)
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _local_path(source: Any) -> Path | None:
    """The local directory/file behind ``source`` (an ``il.Model``, a path), or None for a URI."""
    if hasattr(source, "path"):  # il.Model / il.Dataset
        source = source.path
    if isinstance(source, os.PathLike):
        return Path(source)
    text = str(source)
    if text.startswith("file://"):
        return None  # already a URI the registry can store as is
    if "://" in text or text.startswith(("runs:/", "models:/")):
        return None
    return Path(text)


class MlflowRegistry:
    """Tracking runs and a model registry with aliases, on one MLflow store.

    ``MlflowRegistry(tracking_dir=...)`` uses ``sqlite:///<dir>/mlflow.db`` (artifacts in
    ``<dir>/mlartifacts``) unless ``tracking_uri`` or ``MLFLOW_TRACKING_URI`` names another
    store. Every MLflow failure is raised as ``MlflowError``/``RegistryError``.
    """

    def __init__(
        self,
        tracking_dir: str | os.PathLike[str] | None = None,
        tracking_uri: str | None = None,
    ) -> None:
        self.store: Store = resolve_store(tracking_dir, tracking_uri)
        self._client: Any = None

    @property
    def tracking_uri(self) -> str:
        return self.store.tracking_uri

    @property
    def client(self) -> Any:
        """The underlying ``mlflow.MlflowClient`` (created on first use)."""
        if self._client is None:
            from mlflow import MlflowClient

            with wrapped(f"opening the MLflow store {self.store.tracking_uri}"):
                self._client = MlflowClient(
                    tracking_uri=self.store.tracking_uri, registry_uri=self.store.registry_uri
                )
        return self._client

    # ---- tracking -------------------------------------------------------------------

    def experiment_id(self, name: str) -> str:
        """The id of experiment ``name``, created (with our artifact root) when missing."""
        from mlflow.exceptions import MlflowException

        with wrapped(f"getting experiment {name!r}"):
            exp = self.client.get_experiment_by_name(name)
            if exp is not None:
                return exp.experiment_id
            try:
                return self.client.create_experiment(
                    name, artifact_location=self.store.artifact_root
                )
            except MlflowException as exc:  # created concurrently by another process
                if getattr(exc, "error_code", None) != "RESOURCE_ALREADY_EXISTS":
                    raise
                return self.client.get_experiment_by_name(name).experiment_id

    def log_run(
        self,
        experiment: str,
        *,
        params: Mapping[str, Any] | Any | None = None,
        metrics: Mapping[str, float] | None = None,
        receipt: Mapping[str, Any] | None = None,
        artifacts: Mapping[str, Any] | None = None,
        run_name: str | None = None,
        tags: Mapping[str, Any] | None = None,
    ) -> str:
        """Log one finished run; return its MLflow run id.

        ``params`` (nested mappings/dataclasses are flattened with dots) and ``tags`` lose
        entries that are or look like credentials. The receipt becomes short
        ``interlock.*`` tags and, with credentials redacted, the artifact ``receipt.json``.
        ``artifacts`` maps an artifact path in the run to a local file or directory (or an
        ``il.Model``/``il.Dataset``).
        """
        from mlflow.entities import Metric, Param, RunTag

        exp_id = self.experiment_id(experiment)
        given: Any = params
        param_map: Mapping[str, Any] = (
            dataclasses.asdict(given)  # e.g. a TrainParams dataclass
            if dataclasses.is_dataclass(given) and not isinstance(given, type)
            else dict(given or {})
        )
        flat_params = {k: v for k, v in _flatten(param_map).items() if not is_secret(k, v)}
        run_tags = {**receipt_tags(receipt), **filter_secrets(dict(tags or {}))}
        with wrapped(f"starting a run in experiment {experiment!r}"):
            run = self.client.create_run(exp_id, run_name=run_name, tags={"interlock": "true"})
        run_id = run.info.run_id
        status = "FAILED"
        try:
            with wrapped(f"logging run {run_id}"):
                now = int(_dt.datetime.now(_dt.UTC).timestamp() * 1000)
                metric_list = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
                param_list = [Param(k, str(v)[:_MAX_PARAM_VALUE]) for k, v in flat_params.items()]
                tag_list = [RunTag(k, str(v)) for k, v in run_tags.items()]
                # MLflow's log_batch limits: 1000 metrics, 100 params, 100 tags per call.
                for i in range(0, len(metric_list), 1000):
                    self.client.log_batch(run_id, metrics=metric_list[i : i + 1000])
                for i in range(0, len(param_list), 100):
                    self.client.log_batch(run_id, params=param_list[i : i + 100])
                for i in range(0, len(tag_list), 100):
                    self.client.log_batch(run_id, tags=tag_list[i : i + 100])
                if receipt is not None:
                    self.client.log_dict(run_id, redact(dict(receipt)), RECEIPT_ARTIFACT)
                for name, value in (artifacts or {}).items():
                    self._log_artifact(run_id, name, value)
            status = "FINISHED"
        finally:
            with wrapped(f"closing run {run_id}"):
                self.client.set_terminated(run_id, status)
        return run_id

    def run_metrics(self, run_id: str) -> dict[str, float]:
        """The latest value of each metric of a run (e.g. the champion's, for a gate)."""
        with wrapped(f"reading the metrics of run {run_id}"):
            return dict(self.client.get_run(run_id).data.metrics)

    def _log_artifact(self, run_id: str, name: str, value: Any) -> None:
        path = _local_path(value)
        if path is None or not path.exists():
            raise MlflowError(
                f"artifact {name!r}: {value!r} is not a local file or directory",
                hint="log_run uploads local paths; pass the path the step wrote",
            )
        if path.is_dir():
            self.client.log_artifacts(run_id, str(path), artifact_path=name)
        else:
            self.client.log_artifact(run_id, str(path), artifact_path=name)

    # ---- registry -------------------------------------------------------------------

    def _ensure_model(self, model_name: str) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self.client.create_registered_model(model_name)
        except MlflowException as exc:
            if getattr(exc, "error_code", None) != "RESOURCE_ALREADY_EXISTS":
                raise

    def register(
        self,
        model_name: str,
        source: Any,
        *,
        run_id: str | None = None,
        tags: Mapping[str, Any] | None = None,
        receipt: Mapping[str, Any] | None = None,
        gpu: Mapping[str, Any] | None = None,
        description: str | None = None,
        artifact_path: str = "model",
    ) -> str:
        """Create a version of ``model_name`` and return its number (a string, e.g. ``"3"``).

        ``source``: a local model directory (or ``il.Model``) or a URI (``runs:/...``,
        ``s3://...``, ``file://...``). A local directory is first uploaded into the run's
        artifacts under ``artifact_path`` (a run is created in experiment ``model_name``
        when ``run_id`` is None), so the version never points at a temporary directory.
        Version tags: the receipt's ``interlock.*`` tags, ``gpu`` (from ``gpu_tags()``) and
        ``tags``, credentials filtered out.
        """
        with wrapped(f"registering a version of {model_name!r}", error=RegistryError):
            local = _local_path(source)
            if local is not None:
                if not local.exists():
                    raise RegistryError(f"model source {str(local)!r} does not exist")
                if run_id is None:
                    run_id = self.log_run(
                        model_name, receipt=receipt, run_name=f"register-{model_name}"
                    )
                self._log_artifact(run_id, artifact_path, local)
                uri = f"{self.client.get_run(run_id).info.artifact_uri.rstrip('/')}/{artifact_path}"
            else:
                uri = str(getattr(source, "path", source))
            version_tags = {
                **receipt_tags(receipt),
                **{k: str(v) for k, v in (gpu or {}).items() if v is not None},
                **{k: str(v) for k, v in (tags or {}).items()},
            }
            self._ensure_model(model_name)
            mv = self.client.create_model_version(
                model_name,
                uri,
                run_id=run_id,
                tags=filter_secrets(version_tags),
                description=description,
            )
            return str(mv.version)

    def aliases(self, model_name: str) -> dict[str, str]:
        """``{alias: version}`` of ``model_name``; ``{}`` when the model is not registered."""
        from mlflow.exceptions import MlflowException

        with wrapped(f"reading the aliases of {model_name!r}", error=RegistryError):
            try:
                model = self.client.get_registered_model(model_name)
            except MlflowException as exc:
                if getattr(exc, "error_code", None) == "RESOURCE_DOES_NOT_EXIST":
                    return {}
                raise
            return {a: str(v) for a, v in (model.aliases or {}).items()}

    def champion(self, model_name: str) -> str | None:
        """The version holding the ``champion`` alias, or None (no model, or none promoted)."""
        return self.aliases(model_name).get(CHAMPION)

    def challenger(self, model_name: str) -> str | None:
        return self.aliases(model_name).get(CHALLENGER)

    def describe(self, model_name: str, version: str | int) -> ModelVersionInfo:
        """One version's source, run, tags and aliases."""
        with wrapped(f"reading {model_name!r} version {version}", error=RegistryError):
            mv = self.client.get_model_version(model_name, str(version))
        return ModelVersionInfo(
            name=mv.name,
            version=str(mv.version),
            source=mv.source,
            run_id=mv.run_id or None,
            status=str(mv.status),
            tags=dict(mv.tags or {}),
            aliases=tuple(mv.aliases or ()),
        )

    def download(self, model_name: str, version: str | int, dst: str | os.PathLike[str]) -> Path:
        """Copy a version's files into ``dst``; return the local path of the model."""
        import mlflow.artifacts

        info = self.describe(model_name, version)
        Path(dst).mkdir(parents=True, exist_ok=True)
        with wrapped(f"downloading {model_name!r} version {version}", error=RegistryError):
            return Path(
                mlflow.artifacts.download_artifacts(
                    artifact_uri=info.source,
                    dst_path=str(dst),
                    tracking_uri=self.store.tracking_uri,
                    registry_uri=self.store.registry_uri,
                )
            )

    def promote(self, model_name: str, version: str | int) -> str | None:
        """Make ``version`` the champion; return the version that was champion before.

        The replaced champion keeps its version and gets the ``previous-champion`` alias;
        the new champion is tagged ``interlock.promoted_from``/``interlock.promoted_at``, and
        loses the ``challenger`` alias if it held it. Promoting the current champion again
        changes nothing and returns that same version.
        """
        version = str(version)
        with wrapped(f"promoting {model_name!r} version {version}", error=RegistryError):
            self.client.get_model_version(model_name, version)  # fail early on a bad version
            current = self.aliases(model_name)
            previous = current.get(CHAMPION)
            if previous == version:
                return previous
            # previous-champion first: if the champion move then fails, the champion is intact.
            if previous is not None:
                self.client.set_registered_model_alias(model_name, PREVIOUS_CHAMPION, previous)
            self.client.set_registered_model_alias(model_name, CHAMPION, version)
            stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
            self.client.set_model_version_tag(model_name, version, "interlock.promoted_at", stamp)
            if previous is not None:
                self.client.set_model_version_tag(
                    model_name, version, "interlock.promoted_from", previous
                )
            if current.get(CHALLENGER) == version:
                self.client.delete_registered_model_alias(model_name, CHALLENGER)
            return previous

    def rollback(self, model_name: str) -> str:
        """Swap ``champion`` and ``previous-champion``; return the restored champion."""
        current = self.aliases(model_name)
        previous = current.get(PREVIOUS_CHAMPION)
        if previous is None:
            raise RegistryError(
                f"{model_name!r} has no {PREVIOUS_CHAMPION!r} version to roll back to"
            )
        with wrapped(f"rolling back {model_name!r}", error=RegistryError):
            if current.get(CHAMPION) is not None:
                self.client.set_registered_model_alias(
                    model_name, PREVIOUS_CHAMPION, current[CHAMPION]
                )
            self.client.set_registered_model_alias(model_name, CHAMPION, previous)
        return previous

    def set_challenger(self, model_name: str, version: str | int) -> None:
        """Point the ``challenger`` alias at ``version``."""
        with wrapped(f"setting the challenger of {model_name!r}", error=RegistryError):
            self.client.set_registered_model_alias(model_name, CHALLENGER, str(version))


__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "PREVIOUS_CHAMPION",
    "MlflowError",
    "MlflowRegistry",
    "ModelRegistry",
    "ModelVersionInfo",
    "RegistryError",
]
