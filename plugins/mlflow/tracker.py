"""One MLflow run per pipeline run, on every backend: ``track(pipeline, ...)``.

    from interlock.plugins import mlflow as il_mlflow
    il_mlflow.track(fraud_retrain, experiment="fraud-retrain", store_param="registry")

``il.run`` (and ``interlock run``) then tells the tracker when each run of the pipeline
starts and ends, in the process that started it (core's tracker seam, core/record/trackers.py):

- at the start (in a thread, so that importing MLflow overlaps the first steps), the MLflow run: name ``PIPELINE-RUN_ID``, MLflow's standard tags
  (``mlflow.source.name``/``type``, ``mlflow.source.git.commit``, ``mlflow.user``), the
  pipeline's parameters (nested ones flattened with dots, secrets left out) and the tags
  ``interlock.run_id``/``pipeline``/``backend``. Its id is written to the run's state
  (``trackers/mlflow.json``), and any process can find it by the tag ``interlock.run_id``
  (``pipeline_run``): a step that registers a model attaches it to this run;
- at the end, whatever happened (succeeded, failed, not promoted): one nested run per step
  that ran (``mlflow.parentRunId``; start and end times, attempts, cache hits, failure
  kind), every point steps logged with ``ctx.log_metric`` with its step and time (the
  training curves; on the step's run, and on the pipeline's run under the same name, or
  ``NODE/NAME`` when two steps log the same name), the pipeline's numeric outputs
  (``challenger.auc``), the receipt as ``receipt.json``, and the status: ``FINISHED``,
  ``FAILED`` or ``KILLED`` (stopped), with start and end times of the pipeline run.

The points are read from the run's state after the run, so steps in other processes
(kfp-local) need nothing of their own. A resumed run (same run id) continues the same
MLflow run; points already forwarded are not sent again.
"""

from __future__ import annotations

import getpass
import importlib.util
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.core.record.trackers import TrackedRun, attach

from .registry import MlflowRegistry, _flatten
from .store import wrapped
from .tags import REDACTED, _short, filter_secrets, is_secret, receipt_tags, redact

if TYPE_CHECKING:
    from interlock.core.record.outcomes import RunResult

log = logging.getLogger("interlock.mlflow")

RUN_ID_TAG = "interlock.run_id"
KIND_TAG = "interlock.kind"  # "pipeline" | "step"
NODE_TAG = "interlock.node"
RUN_KEY_TAG = "interlock.run_key"  # run_key(): pipeline and state directory
NOTE = Path("trackers") / "mlflow.json"  # in the run's state dir
DEFAULT_STORE_DIR = Path(".interlock") / "mlflow"
_MAX_PARAM_VALUE = 6000
_BATCH = 1000  # MLflow's log_batch limit on metrics per call


def registry_at(location: str | os.PathLike[str] | None = "", *, default_dir: str | os.PathLike[str] = DEFAULT_STORE_DIR) -> MlflowRegistry:
    """The MLflow store ``location`` names: a tracking URI (``http://...``, ``sqlite:///...``)
    or a directory for a SQLite store; empty means ``$MLFLOW_TRACKING_URI`` when set, else
    ``default_dir`` (``.interlock/mlflow`` under the current directory). A directory wins
    over ``$MLFLOW_TRACKING_URI``."""
    text = str(location or "")
    if "://" in text or text.startswith("sqlite:"):
        return MlflowRegistry(tracking_uri=text)
    if not text and os.environ.get("MLFLOW_TRACKING_URI"):
        return MlflowRegistry()
    base = Path(text or default_dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    return MlflowRegistry(tracking_uri=f"sqlite:///{base / 'mlflow.db'}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def run_key(pipeline: str, state_dir: str | os.PathLike[str] | None) -> str | None:
    """What tells one interlock run from another with the same run id: its pipeline and its
    state directory (two work directories may each hold a run ``r1``). A digest: the tag
    says nothing about the machine's paths."""
    if not state_dir:
        return None
    import hashlib

    where = os.path.realpath(os.fspath(state_dir))
    return hashlib.sha256(f"{pipeline}\0{where}".encode()).hexdigest()[:20]


def find_run(reg: MlflowRegistry, experiment_id: str, run_id: str, node: str | None = None, *,
             key: str | None = None) -> str | None:
    """The MLflow run of interlock run ``run_id`` (its step ``node``'s nested run), or None;
    ``key`` (``run_key``): only the run of that pipeline and state directory."""
    query = f"tags.`{RUN_ID_TAG}` = '{_escape(run_id)}' and tags.`{KIND_TAG}` = '{'step' if node else 'pipeline'}'"
    if node:
        query += f" and tags.`{NODE_TAG}` = '{_escape(node)}'"
    if key:
        query += f" and tags.`{RUN_KEY_TAG}` = '{_escape(key)}'"
    with wrapped(f"looking up the MLflow run of interlock run {run_id}"):
        found = reg.client.search_runs([experiment_id], filter_string=query, max_results=1, order_by=["attribute.start_time ASC"])
    return found[0].info.run_id if found else None


def pipeline_run(
    reg: MlflowRegistry,
    experiment: str,
    run_id: str,
    *,
    pipeline: str | None = None,
    tags: Mapping[str, Any] | None = None,
    start_time: float | None = None,
    key: str | None = None,
) -> str:
    """The id of the MLflow run of interlock run ``run_id`` in ``experiment``, created when
    missing. Any process finds the same one (tags ``interlock.run_id`` and, given ``key``,
    ``interlock.run_key``: the same run id in another work directory is another run); on a
    SQLite store the store's lock makes find-or-create one step for every process."""
    exp_id = reg.experiment_id(experiment)
    with reg.lock.hold(f"finding the MLflow run of {run_id}", reg.lock_timeout):
        found = find_run(reg, exp_id, run_id, key=key)
        if found is not None:
            return found
        all_tags = {RUN_ID_TAG: run_id, KIND_TAG: "pipeline", "interlock": "true", **(tags or {})}
        if key:
            all_tags[RUN_KEY_TAG] = key
        if pipeline:
            all_tags.setdefault("interlock.pipeline", pipeline)
        with wrapped(f"starting the MLflow run of {run_id}"):
            run = reg.client.create_run(
                exp_id,
                start_time=int((start_time or time.time()) * 1000),
                run_name=f"{pipeline}-{run_id}" if pipeline else run_id,
                tags={k: str(v) for k, v in filter_secrets(all_tags).items()},
            )
        return str(run.info.run_id)


def run_for_step(ctx: Any, reg: MlflowRegistry, experiment: str) -> str:
    """The MLflow run of the pipeline run a step belongs to (``ctx``: its il.StepContext)."""
    return pipeline_run(reg, experiment, ctx.run_id, pipeline=ctx.pipeline, tags={"interlock.backend": ctx.backend},
                        key=run_key(ctx.pipeline, getattr(ctx, "state_dir", None)))


def _source_name(spec: Any) -> str:
    module = sys.modules.get((spec.ref or "").partition(":")[0])
    path = getattr(module, "__file__", None)
    if not path:
        return spec.ref or spec.name
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _user() -> str | None:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return None
    return None if is_secret("user", user) else user


def _params(params: Mapping[str, Any]) -> dict[str, str]:
    from interlock.core.record.receipt import redact as redact_params

    flat = _flatten(redact_params(dict(params)))
    return {k: str(v)[:_MAX_PARAM_VALUE] for k, v in flat.items() if not is_secret(k, v)}


def _ms(seconds: float | None) -> int | None:
    return int(seconds * 1000) if seconds else None


_STATUS = {"succeeded": "FINISHED", "cached": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}


class MlflowTracker:
    """The MLflow side of core's tracker seam (see the module docstring)."""

    name = "mlflow"

    def __init__(
        self,
        experiment: str | None = None,
        *,
        store: str | None = None,
        store_param: str | None = None,
        registry: Callable[[], MlflowRegistry] | None = None,
    ) -> None:
        self.experiment = experiment
        self.store = store
        self.store_param = store_param
        self._registry = registry
        self._threads: dict[str, threading.Thread] = {}

    # -- where ---------------------------------------------------------------------------
    def registry_for(self, run: TrackedRun) -> MlflowRegistry:
        if self._registry is not None:
            return self._registry()
        location = self.store
        if self.store_param is not None:
            location = str(run.params.get(self.store_param) or "") or location
        return registry_at(location or "")

    def experiment_for(self, run: TrackedRun) -> str:
        return self.experiment or run.spec.name

    # -- the seam --------------------------------------------------------------------------
    def run_started(self, run: TrackedRun) -> None:
        """Open the store and the MLflow run in a thread: importing MLflow (seconds) overlaps
        the first steps instead of delaying them. ``run_finished`` waits for it."""
        # pandas first, here: MLflow imports it in the thread while a step (flytekit's type
        # engine) may import it in this one, and the second import of a module that two threads
        # import at once can see it half-initialised ("module 'pandas' has no attribute
        # 'DataFrame'", a flyte-local run in CI).
        if importlib.util.find_spec("pandas") is not None:
            import pandas  # noqa: F401
        thread = threading.Thread(target=self._start, args=(run,), name=f"interlock-mlflow-{run.run_id}", daemon=True)
        self._threads[run.run_id] = thread
        thread.start()

    def _start(self, run: TrackedRun) -> None:
        try:
            self.open_run(run)
        except Exception as exc:  # a tracker never fails a training run
            log.warning("tracker mlflow could not record the run's start: %s", exc)

    def open_run(self, run: TrackedRun) -> str:
        """Create (or, for a resumed run, reopen) the MLflow run of ``run``; returns its id."""
        from interlock.core.record.receipt import code_files, git_info

        reg = self.registry_for(run)
        git = git_info(files=code_files(run.spec))
        tags = {
            "mlflow.source.name": _source_name(run.spec),
            "mlflow.source.type": "JOB",
            "mlflow.source.git.commit": git.get("sha"),
            "mlflow.user": _user(),
            "interlock.backend": run.backend,
            "interlock.git_dirty": git.get("dirty"),
            "interlock.pipeline_ref": run.spec.ref,
        }
        tags = {k: _short(v) for k, v in tags.items() if v is not None}
        experiment = self.experiment_for(run)
        mlflow_run = pipeline_run(reg, experiment, run.run_id, pipeline=run.spec.name, tags=tags, start_time=run.started,
                                  key=run_key(run.spec.name, run.state_dir))
        client = reg.client
        with wrapped(f"logging the parameters of MLflow run {mlflow_run}"):
            current = client.get_run(mlflow_run)
            if run.resumed or current.info.status != "RUNNING":
                client.update_run(mlflow_run, status="RUNNING")
            # Parameters are immutable in MLflow: a resumed run logs only the ones it lacks.
            from mlflow.entities import Param, RunTag

            params = [Param(k, v) for k, v in _params(run.params).items() if k not in current.data.params]
            for i in range(0, len(params), 100):
                client.log_batch(mlflow_run, params=params[i : i + 100])
            missing = [RunTag(k, v) for k, v in tags.items() if current.data.tags.get(k) != v]
            if missing:
                client.log_batch(mlflow_run, tags=missing)
        self._write_note(run, {**self._read_note(run), "mlflow_run_id": mlflow_run, "experiment": experiment,
                               "tracking_uri": reg.tracking_uri})
        log.info("MLflow run %s (experiment %s, %s)", mlflow_run, experiment, reg.tracking_uri)
        return mlflow_run

    def run_finished(self, run: TrackedRun, result: RunResult | None, error: BaseException | None) -> None:
        from interlock.core.run.metrics import read_points

        thread = self._threads.pop(run.run_id, None)
        if thread is not None:
            thread.join()
        # Only now: while the start thread is still importing MLflow, an import here can meet
        # its modules half-initialised ("cannot import name 'Run' from partially initialized
        # module 'mlflow.entities'") and neither end of the run is recorded. A short run did.
        from mlflow.entities import RunTag
        note = self._read_note(run)
        mlflow_run = note.get("mlflow_run_id")
        if not mlflow_run:
            return
        reg = self.registry_for(run)
        client = reg.client
        receipt = _receipt(result)
        status = "FAILED"
        if result is not None:
            status = "FINISHED" if result.succeeded else ("KILLED" if _stopped(result) else "FAILED")
        sent: dict[str, int] = dict(note.get("points_sent") or {})
        points_by_node: dict[str, list[Any]] = {}
        for point in read_points(run.state_dir):
            if point.kind == "metric":
                points_by_node.setdefault(point.node, []).append(point)
        names: dict[str, set[str]] = {}
        for node, points in points_by_node.items():
            for p in points:
                names.setdefault(p.name, set()).add(node)
        exp_id = reg.experiment_id(self.experiment_for(run))
        with wrapped(f"logging the end of MLflow run {mlflow_run}"):
            steps = receipt.get("steps") or []
            for step in steps:
                node = step.get("node")
                if step.get("status") not in _STATUS:
                    continue
                child = self._step_run(reg, exp_id, mlflow_run, run, step)
                points = points_by_node.get(node, [])[sent.get(node, 0):]
                self._log_points(client, child, [(p.name, p) for p in points])
                self._log_points(client, mlflow_run, [(p.name if len(names[p.name]) == 1 else f"{node}/{p.name}", p) for p in points])
                sent[node] = sent.get(node, 0) + len(points)
                self._log_usage(client, child, step, (step.get("usage") or {}), step.get("gpu_efficiency"))
                attempts = step.get("attempts") or []
                client.set_terminated(child, _STATUS[step["status"]], end_time=_ms(attempts[-1].get("ended")) if attempts else None)
            for node, points in points_by_node.items():  # a step the receipt does not list (no receipt)
                if node not in {s.get("node") for s in steps}:
                    rest = points[sent.get(node, 0):]
                    self._log_points(client, mlflow_run, [(p.name if len(names[p.name]) == 1 else f"{node}/{p.name}", p) for p in rest])
                    sent[node] = sent.get(node, 0) + len(rest)
            self._log_outputs(client, mlflow_run, result, run.params)
            totals = receipt.get("totals") or {}
            if totals:
                self._log_usage(client, mlflow_run, totals, totals, totals.get("gpu_efficiency"))
            tags = {**receipt_tags(receipt), "interlock.status": str(receipt.get("status") or status.lower())}
            if error is not None:
                tags["interlock.error"] = _short(f"{type(error).__name__}: {error}")
            elif result is not None and result.error is not None:
                tags["interlock.error"] = _short(str(result.error))
            tag_list = [RunTag(k, str(v)) for k, v in filter_secrets(tags).items()]
            for i in range(0, len(tag_list), 100):
                client.log_batch(mlflow_run, tags=tag_list[i : i + 100])
            if receipt:
                client.log_dict(mlflow_run, redact(dict(receipt)), "receipt.json")
            client.set_terminated(mlflow_run, status, end_time=_ms(receipt.get("ended")) or _ms(time.time()))
        self._write_note(run, {**note, "points_sent": sent})

    # -- helpers -------------------------------------------------------------------------------
    def _step_run(self, reg: MlflowRegistry, exp_id: str, parent: str, run: TrackedRun, step: Mapping[str, Any]) -> str:
        node = str(step["node"])
        key = run_key(run.spec.name, run.state_dir)
        found = find_run(reg, exp_id, run.run_id, node, key=key)
        attempts = step.get("attempts") or []
        failures = step.get("failure_kinds") or []
        tags = {
            "mlflow.parentRunId": parent,
            RUN_ID_TAG: run.run_id,
            KIND_TAG: "step",
            NODE_TAG: node,
            RUN_KEY_TAG: key,
            "interlock.step": step.get("step"),
            "interlock.status": step.get("status"),
            "interlock.cached": step.get("cached"),
            "interlock.attempts": len(attempts),
            "interlock.failure_kind": failures[-1] if failures else None,
            "interlock.duration_s": step.get("duration_s"),
            "interlock.cached_from_run": (step.get("facts") or {}).get("cached_from_run"),
        }
        tags = {k: _short(v) for k, v in tags.items() if v is not None}
        if found is None:
            started = attempts[0].get("started") if attempts else None
            child = reg.client.create_run(exp_id, start_time=_ms(started), run_name=node, tags=tags)
            return str(child.info.run_id)
        from mlflow.entities import RunTag

        reg.client.log_batch(found, tags=[RunTag(k, v) for k, v in tags.items()])
        return found

    @staticmethod
    def _log_usage(client: Any, mlflow_run: str, billed: Mapping[str, Any], used: Mapping[str, Any],
                   efficiency: Mapping[str, Any] | None) -> None:
        """What the step (or the run) used, as metrics: data wait, checkpoint time, GPU-seconds,
        the GPU efficiency ratio and utilization, the cost estimate (the receipt's figures)."""
        from mlflow.entities import Metric

        values = {
            "interlock.data_wait_s": used.get("data_wait_s"),
            "interlock.checkpoint_s": used.get("checkpoint_s"),
            "interlock.gpu_seconds": billed.get("gpu_seconds"),
            "interlock.gpu_utilization": used.get("gpu_utilization"),
            "interlock.gpu_efficiency": (efficiency or {}).get("ratio"),
            "interlock.estimated_cost_usd": billed.get("estimated_cost_usd"),
        }
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, 0) for k, v in values.items() if isinstance(v, int | float)]
        if metrics:
            client.log_batch(mlflow_run, metrics=metrics)

    @staticmethod
    def _log_points(client: Any, mlflow_run: str, points: list[tuple[str, Any]]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(name, p.value, int(p.at * 1000), p.step or 0) for name, p in points]
        for i in range(0, len(metrics), _BATCH):
            client.log_batch(mlflow_run, metrics=metrics[i : i + _BATCH])

    @staticmethod
    def _log_outputs(client: Any, mlflow_run: str, result: RunResult | None, params: Mapping[str, Any]) -> None:
        """Numbers among the pipeline's outputs (il.Metrics flattened) as metrics; short
        scalars (a gate's decision) as ``interlock.output.NAME`` tags, credentials masked (a
        URL's password, a secret parameter returned as an output) as in the receipt."""
        from mlflow.entities import Metric, RunTag

        from interlock.core.run.redact import Redactor

        if result is None:
            return
        redactor = Redactor.for_values(params, mask=REDACTED)
        now = int(time.time() * 1000)
        metrics, tags = [], []
        for name, value in result.outputs.items():
            if isinstance(value, Mapping):
                for k, v in _flatten(value, f"{name}.").items():
                    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                        metrics.append(Metric(k, float(v), now, 0))
            elif isinstance(value, int | float) and not isinstance(value, bool):
                metrics.append(Metric(name, float(value), now, 0))
            elif isinstance(value, bool):
                tags.append(RunTag(f"interlock.output.{name}", _short(value)))
            elif isinstance(value, str):
                tags.append(RunTag(f"interlock.output.{name}", _short(redactor(value, name))))
        if metrics or tags:
            client.log_batch(mlflow_run, metrics=metrics, tags=tags)

    @staticmethod
    def _read_note(run: TrackedRun) -> dict[str, Any]:
        try:
            return dict(json.loads((run.state_dir / NOTE).read_text()))
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _write_note(run: TrackedRun, note: Mapping[str, Any]) -> None:
        path = run.state_dir / NOTE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(note, indent=1, sort_keys=True))
        tmp.replace(path)


def _receipt(result: RunResult | None) -> dict[str, Any]:
    if result is None or result.receipt_path is None:
        return {}
    try:
        return dict(json.loads(Path(result.receipt_path).read_text()))
    except (OSError, ValueError):
        return {}


def _stopped(result: RunResult) -> bool:
    return any(str(o.status) == "stopped" for o in result.steps.values())


def track(
    pipeline: Any,
    *,
    experiment: str | None = None,
    store: str | None = None,
    store_param: str | None = None,
) -> MlflowTracker:
    """Log every run of ``pipeline`` to MLflow (see the module docstring).

    ``experiment``: default the pipeline's name. ``store``: a tracking URI or a directory
    for a SQLite store (``registry_at``); ``store_param``: the name of a pipeline parameter
    that holds it (its value wins when not empty). Neither: ``$MLFLOW_TRACKING_URI``, else
    ``.interlock/mlflow``.
    """
    name = pipeline if isinstance(pipeline, str) else getattr(pipeline, "name", None)
    if not name:
        raise TypeError(f"track() needs an @il.pipeline or a pipeline name, got {pipeline!r}")
    tracker = MlflowTracker(experiment, store=store, store_param=store_param)
    attach(name, tracker)
    return tracker


__all__ = [
    "DEFAULT_STORE_DIR",
    "MlflowTracker",
    "find_run",
    "pipeline_run",
    "registry_at",
    "run_for_step",
    "track",
]
