"""MLflow tracking and model registry for interlock pipelines, on ``mlflow.MlflowClient``.

Promotion uses registry aliases only (stages are deprecated):
- ``champion``: the version serving now;
- ``previous-champion``: the version ``promote`` replaced, kept for ``rollback``;
- ``challenger``: a candidate under evaluation (``set_challenger``).
No version is ever deleted or archived by a promotion. ``mlflow`` is imported inside the
methods so that importing this module stays cheap.

A gate compares a challenger with one champion version; ``promote(...,
expected_champion=that_version)`` moves the alias only if it still points there
(compare-and-set), else raises ``ChampionMoved``. MLflow has no atomic CAS on aliases: on
a SQLite store a file lock next to the database (``mlflow.db.lock``, see ``lock.py``) makes
check-and-set one step for every process on the machine or shared filesystem; on a
tracking server the champion is re-read before and after the move, which narrows the race
to the few milliseconds between two requests but cannot close it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from interlock.core.base.status import FailureKind

from . import template
from .lock import DEFAULT_TIMEOUT_S, StoreLock
from .store import MlflowError, RegistryError, Store, _sqlite_path, resolve_store, wrapped
from .tags import filter_secrets, is_secret, receipt_tags, redact

CHAMPION = "champion"
PREVIOUS_CHAMPION = "previous-champion"
CHALLENGER = "challenger"
RECEIPT_ARTIFACT = "receipt.json"
_MAX_PARAM_VALUE = 6000  # MLflow's limit on a param value


class _Unchecked:
    """The default of ``expected_champion``: move the alias whatever it points at now."""

    _instance: _Unchecked | None = None

    def __new__(cls) -> _Unchecked:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHECKED"

    def __reduce__(self) -> str:
        return "UNCHECKED"


UNCHECKED: Any = _Unchecked()
# What a gate step may pass for "there was no champion" besides None (a KFP/Flyte string
# output cannot be None): the reference pipeline's evaluate step says "none".
_NO_CHAMPION = ("", "none")


def _expected(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text.lower() in _NO_CHAMPION else text


class ChampionMoved(RegistryError):
    """The ``champion`` alias no longer points at the version a gate compared against.

    Another run promoted a model between this run's evaluation and its promotion: moving
    the alias now could replace a better champion with one that was never compared with
    it. Nothing was promoted. FATAL: retrying the promotion fails the same way; the
    evaluation has to run again, against the new champion.
    """

    code = "MLFLOW_CHAMPION_MOVED"
    interlock_failure_kind = FailureKind.FATAL

    def __init__(
        self,
        model_name: str,
        version: str | None,
        *,
        expected: str | None,
        found: str | None,
        overtaken: bool = False,
    ) -> None:
        self.model_name = model_name
        self.version = version
        self.expected = expected
        self.found = found
        self.overtaken = overtaken
        exp = f"version {expected}" if expected is not None else "no champion"
        now = f"version {found}" if found is not None else "no champion"
        if overtaken:
            message = (
                f"{model_name!r} version {version} was made champion (it was compared against "
                f"{exp}), but a concurrent promotion replaced it at once: the champion is now {now}"
            )
            hint = (
                "two runs promoted at the same time on a store without a lock (a tracking "
                "server); check the registry, and re-run the evaluation of the one you want "
                "against the current champion. Serialise promotions to avoid this (one "
                "register task at a time, e.g. an Airflow pool of size 1)"
            )
        else:
            what = (
                f"not promoting {model_name!r} version {version}"
                if version is not None
                else f"not registering a new version of {model_name!r}"
            )
            message = (
                f"{what}: the gate compared it against {exp}, but the champion is now {now} "
                "(another run promoted meanwhile)"
            )
            kept = (
                f"version {version} stays registered, not promoted"
                if version is not None
                else "nothing was registered"
            )
            hint = (
                "re-run the evaluation against the current champion (run the pipeline again: "
                f"an evaluation is valid for one champion version only); {kept}"
            )
        super().__init__(message, hint=hint)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields: rebuild from the state (a step process may hand it back).
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[Exception], args: tuple[Any, ...], state: dict[str, Any]) -> Exception:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


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
        expected_champion: Any = UNCHECKED,
    ) -> str: ...

    def promote(
        self, model_name: str, version: str | int, *, expected_champion: Any = UNCHECKED
    ) -> str | None: ...

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


def _sqlite_file(uri: str) -> Path | None:
    path = _sqlite_path(uri)
    return path.resolve() if path is not None else None


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


# MLflow's own chatter on first use ("Creating initial MLflow database tables...", alembic's
# "Running upgrade" lines, one per migration): noise in a run's output. Warnings still show.
_CHATTY_LOGGERS = (
    "mlflow.store.db.utils", "mlflow.store.model_registry.abstract_store", "alembic",
    "alembic.runtime.migration", "mlflow.pyfunc", "mlflow.models.model", "mlflow.models.signature",
)


class _QuietUnlessVerbose(logging.Filter):
    """Drops those loggers' records below ``level`` unless the output is verbose at the time
    of the record (``--verbose``, ``INTERLOCK_VERBOSE=1``). A filter, not a level: a level set
    once would hide them from a later verbose run in the same process."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        from interlock.core.run import live

        return record.levelno >= self.level or live.verbose() or os.environ.get("INTERLOCK_VERBOSE") in ("1", "true")


def quiet_mlflow(level: int = logging.WARNING) -> None:
    """Keep MLflow's INFO lines about creating and migrating a store out of the output
    (``INTERLOCK_VERBOSE=1`` or a verbose run keeps them)."""
    for name in _CHATTY_LOGGERS:
        lg = logging.getLogger(name)
        if not any(isinstance(f, _QuietUnlessVerbose) for f in lg.filters):
            lg.addFilter(_QuietUnlessVerbose(level))


class MlflowRegistry:
    """Tracking runs and a model registry with aliases, on one MLflow store.

    ``MlflowRegistry(tracking_dir=...)`` uses ``sqlite:///<dir>/mlflow.db`` (artifacts in
    ``<dir>/mlartifacts``) unless ``tracking_uri`` or ``MLFLOW_TRACKING_URI`` names another
    store. Every MLflow failure is raised as ``MlflowError``/``RegistryError``.

    On a SQLite store, opening it and promoting hold ``mlflow.db.lock`` (next to the
    database) for at most ``lock_timeout`` seconds of waiting.
    """

    def __init__(
        self,
        tracking_dir: str | os.PathLike[str] | None = None,
        tracking_uri: str | None = None,
        *,
        lock_timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.store: Store = resolve_store(tracking_dir, tracking_uri)
        self.lock_timeout = lock_timeout
        self._client: Any = None

    @property
    def lock(self) -> StoreLock:
        """The lock that serialises promotions on this registry (holds nothing on a server)."""
        path = self.store.lock_path
        return StoreLock.at(path) if path is not None else StoreLock.none()

    @property
    def tracking_uri(self) -> str:
        return self.store.tracking_uri

    @property
    def client(self) -> Any:
        """The underlying ``mlflow.MlflowClient`` (created on first use)."""
        if self._client is None:
            quiet_mlflow()
            from mlflow import MlflowClient

            what = f"opening the MLflow store {self.store.tracking_uri}"
            with self._init_locks(what), wrapped(what):
                # A new SQLite store starts as a copy of an empty one at MLflow's schema head
                # (template.py): no migrations. The first one on a machine becomes that copy.
                fresh = [db for db in self._sqlite_files() if not template.seed(db, self.store.artifact_root)]
                fresh = [db for db in fresh if not db.exists()]
                client = MlflowClient(
                    tracking_uri=self.store.tracking_uri, registry_uri=self.store.registry_uri
                )
                if self.store.lock_path or self.store.tracking_lock_path:
                    # MLflow builds a SQLite store (and migrates a fresh one) on first use,
                    # with no lock of its own: do it now, while holding ours. Cheap once
                    # done: the store objects are cached per process.
                    client.search_experiments(max_results=1)
                    client.search_registered_models(max_results=1)
                for db in fresh:
                    template.save(db)
                self._client = client
        return self._client

    def _sqlite_files(self) -> list[Path]:
        paths = {_sqlite_file(self.store.tracking_uri), _sqlite_file(self.store.registry_uri)}
        return sorted(p for p in paths if p is not None)

    @contextmanager
    def _init_locks(self, what: str) -> Iterator[None]:
        paths = sorted({p for p in (self.store.tracking_lock_path, self.store.lock_path) if p})
        with ExitStack() as stack:
            for path in paths:  # sorted: two processes never wait on each other's second lock
                stack.enter_context(StoreLock.at(path).hold(what, self.lock_timeout))
            yield

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

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], *, step: int = 0) -> None:
        """Log ``metrics`` (finite numbers; others are skipped) on run ``run_id`` at ``step``."""
        import math

        from mlflow.entities import Metric

        now = int(_dt.datetime.now(_dt.UTC).timestamp() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items()
                 if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
        with wrapped(f"logging metrics on run {run_id}"):
            for i in range(0, len(batch), 1000):
                self.client.log_batch(run_id, metrics=batch[i : i + 1000])

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
        expected_champion: Any = UNCHECKED,
    ) -> str:
        """Create a version of ``model_name`` and return its number (a string, e.g. ``"3"``).

        ``source``: a local model directory (or ``il.Model``) or a URI (``runs:/...``,
        ``s3://...``, ``file://...``). A local directory is first uploaded into the run's
        artifacts under ``artifact_path`` (a run is created in experiment ``model_name``
        when ``run_id`` is None), so the version never points at a temporary directory.
        Version tags: the receipt's ``interlock.*`` tags, ``gpu`` (from ``gpu_tags()``) and
        ``tags``, credentials filtered out.

        ``expected_champion``: the champion version the gate compared this model against
        (None: there was none). When given, and the champion has moved since, nothing is
        registered and ``ChampionMoved`` is raised; ``promote`` checks it again, atomically.
        """
        if expected_champion is not UNCHECKED:
            self.check_champion(model_name, expected_champion)
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

    def register_pyfunc(
        self,
        model_name: str,
        python_model: Any,
        *,
        input_example: Any,
        run_id: str | None = None,
        artifacts: Mapping[str, Any] | None = None,
        code_paths: list[str | os.PathLike[str]] | None = None,
        pip_requirements: list[str] | None = None,
        packages: tuple[str, ...] = (),
        signature: Any = None,
        artifact_path: str = "model",
        **register_kw: Any,
    ) -> str:
        """Register an MLflow ``pyfunc`` model (an ``MLmodel`` file, a signature, an input
        example) so that ``mlflow.pyfunc.load_model("models:/NAME@champion")`` loads it and
        serving tools can use it; return the new version (see ``register`` for the rest).

        ``python_model``: the path of a file that calls ``mlflow.models.set_model(...)``
        (MLflow's "models from code": nothing pickled), or an ``mlflow.pyfunc.PythonModel``, whose ``load_context`` reads
        ``context.artifacts`` (``artifacts``: name -> a local file or directory, or an
        ``il.Model``). ``input_example``: a few input rows; the signature is inferred from
        it and the model's prediction on it unless ``signature`` is given. ``code_paths``:
        the folders the model's class is imported from when it is loaded (a package of
        your pipeline). ``pip_requirements``: default mlflow, numpy, pandas and
        ``packages`` (e.g. ``("torch",)``) at the versions installed here (MLflow's own
        inference would start a subprocess per model).
        """
        import tempfile
        from importlib.metadata import PackageNotFoundError, version

        import mlflow.pyfunc

        if pip_requirements is None:
            pip_requirements = []
            for dist in ("mlflow", "numpy", "pandas", *packages):
                try:  # without a local label (torch's "+cpu" is not on PyPI)
                    pip_requirements.append(f"{dist}=={version(dist).split('+')[0]}")
                except PackageNotFoundError:
                    continue
        files = {k: str(_local_path(v) or v) for k, v in (artifacts or {}).items()}
        with tempfile.TemporaryDirectory(prefix="interlock-pyfunc-") as tmp:
            path = Path(tmp) / artifact_path
            with wrapped(f"building the MLflow model of {model_name!r}", error=RegistryError):
                quiet_mlflow()
                mlflow.pyfunc.save_model(
                    str(path),
                    python_model=str(python_model) if isinstance(python_model, os.PathLike) else python_model,
                    artifacts=files or None,
                    code_paths=[str(p) for p in code_paths] if code_paths else None,
                    input_example=input_example,
                    signature=signature,
                    pip_requirements=pip_requirements,
                )
            return self.register(model_name, path, run_id=run_id, artifact_path=artifact_path, **register_kw)

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

    def check_champion(self, model_name: str, expected_champion: str | int | None) -> None:
        """Raise ``ChampionMoved`` unless the champion is still ``expected_champion``.

        A cheap early refusal (before logging or registering anything); not atomic on its
        own: ``promote(..., expected_champion=...)`` is the compare-and-set.
        """
        expected = _expected(expected_champion)
        found = self.champion(model_name)
        if found != expected:
            raise ChampionMoved(model_name, None, expected=expected, found=found)

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

    def promote(
        self, model_name: str, version: str | int, *, expected_champion: Any = UNCHECKED
    ) -> str | None:
        """Make ``version`` the champion; return the version that was champion before.

        ``expected_champion``: the champion version the gate compared ``version`` against
        (None or ``"none"``: there was no champion). The alias moves only if it still points
        there; otherwise ``ChampionMoved`` is raised, nothing moves, and the version is
        tagged ``interlock.promotion_refused``. Omitted: the alias moves unconditionally
        (a manual promotion).

        The replaced champion keeps its version and gets the ``previous-champion`` alias;
        the new champion is tagged ``interlock.promoted_from``/``interlock.promoted_at``, and
        loses the ``challenger`` alias if it held it. Promoting the current champion again
        changes nothing and returns that same version.
        """
        version = str(version)
        checked = expected_champion is not UNCHECKED
        expected = _expected(expected_champion) if checked else None
        what = f"promoting {model_name!r} version {version}"
        self.client  # noqa: B018 - open the store before taking the lock (it locks too)
        with self.lock.hold(what, self.lock_timeout), wrapped(what, error=RegistryError):
            self.client.get_model_version(model_name, version)  # fail early on a bad version
            current = self.aliases(model_name)
            previous = current.get(CHAMPION)
            if previous == version:
                return previous
            if checked and previous != expected:
                err = ChampionMoved(model_name, version, expected=expected, found=previous)
                self.client.set_model_version_tag(
                    model_name, version, "interlock.promotion_refused", err.message
                )
                raise err
            # previous-champion first: if the champion move then fails, the champion is intact.
            if previous is not None:
                self.client.set_registered_model_alias(model_name, PREVIOUS_CHAMPION, previous)
            self.client.set_registered_model_alias(model_name, CHAMPION, version)
            if checked and not self.lock.real:
                # No lock on a tracking server: re-read, so that a promotion that raced
                # ours and won is reported rather than silently believed.
                now = self.aliases(model_name).get(CHAMPION)
                if now != version:
                    raise ChampionMoved(
                        model_name, version, expected=expected, found=now, overtaken=True
                    )
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
        what = f"rolling back {model_name!r}"
        self.client  # noqa: B018 - open the store before taking the lock (it locks too)
        with self.lock.hold(what, self.lock_timeout):
            current = self.aliases(model_name)
            previous = current.get(PREVIOUS_CHAMPION)
            if previous is None:
                raise RegistryError(
                    f"{model_name!r} has no {PREVIOUS_CHAMPION!r} version to roll back to"
                )
            with wrapped(what, error=RegistryError):
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
    "UNCHECKED",
    "ChampionMoved",
    "MlflowError",
    "MlflowRegistry",
    "ModelRegistry",
    "ModelVersionInfo",
    "RegistryError",
]
