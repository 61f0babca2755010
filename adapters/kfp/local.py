"""Backend ``kfp-local``: run the compiled kfp pipeline with kfp.local's SubprocessRunner.

kfp does the orchestration (DAG, ``dsl.If``, its own task cache, ``set_retry`` with
backoff); each task is a subprocess running the generated component, i.e. the runtime
shim (in-process TRANSIENT retries, checkpoints, FATAL markers, receipt fragments).
Everything lives under the run's workdir: pipeline root, kfp cache, shim state, receipt.

kfp.local reports only the pipeline's outputs, so the backend observes each task as kfp
runs it (``_TaskObserver`` wraps kfp.local's task executor for the duration of a run):
its outputs, its input artifacts, whether it was a cache hit. That is what the receipt,
RunResult and the lineage record are built from.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.backends import RunOptions, RunResult, StepOutcome
from interlock.core.errors import InterlockError, StepFailed
from interlock.core.receipt import assemble_receipt
from interlock.core.runtime import fragment_path, marker_path
from interlock.core.spec import PipelineSpec
from interlock.core.values import to_jsonable

from .compile import build_pipeline
from .entry import to_value
from .lineage import record_lineage
from .policies import KfpLocalOptions, KfpOptions
from .types import encode, json_text

log = logging.getLogger("interlock.kfp")

# kfp.local keeps one global configuration and runs patch process-wide state (environ,
# kfp.local's task executor): one kfp-local run at a time per process.
_RUN_LOCK = threading.Lock()


@dataclass
class TaskRecord:
    node: str
    status: str  # succeeded | failed
    outputs: dict[str, Any]  # kfp output name -> value or kfp Artifact
    inputs: dict[str, Any]  # kfp input name -> value or kfp Artifact
    cached: bool
    started: float
    ended: float
    fragment_written: bool = False  # the shim ran the step (a receipt fragment was written)
    kfp_attempts: int = 0  # subprocesses kfp actually started for this task
    stopped_by_marker: int = 0  # kfp retries skipped because the node failed FATAL


@dataclass
class _TaskObserver:
    """Wraps kfp.local's per-task executor and per-attempt dispatcher during one run."""

    task_names: dict[str, str]
    state_dir: Path
    run_id: str
    sleeper: Callable[[float], None]
    emit: Callable[[str, str, str], None] = lambda node, event, detail: None
    records: dict[str, TaskRecord] = field(default_factory=dict)
    current: str | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        from kfp.local import task_dispatcher
        from kfp.local.orchestrator import task_executor

        missing = [
            f"{mod.__name__}.{attr}"
            for mod, attr in ((task_executor, "execute_single_task"), (task_executor, "time"),
                              (task_dispatcher, "run_single_task_implementation"))
            if not hasattr(mod, attr)
        ]
        if missing:
            import kfp

            raise InterlockError(
                f"kfp {kfp.__version__} changed kfp.local's internals ({', '.join(missing)} missing); "
                "kfp-local needs them to observe tasks",
                hint="install kfp>=2.17,<3 (the version interlock[kfp] pins)",
            )
        orig_execute = task_executor.execute_single_task
        orig_dispatch = task_dispatcher.run_single_task_implementation
        orig_time = task_executor.time

        def execute(*args: Any, **kw: Any) -> Any:
            return self._execute(orig_execute, *args, **kw)

        def dispatch(*args: Any, **kw: Any) -> Any:
            return self._dispatch(orig_dispatch, *args, **kw)

        task_executor.execute_single_task = execute
        task_dispatcher.run_single_task_implementation = dispatch
        task_executor.time = _Clock(self._sleep)  # kfp's retry backoff goes through our sleeper
        try:
            yield
        finally:
            task_executor.execute_single_task = orig_execute
            task_dispatcher.run_single_task_implementation = orig_dispatch
            task_executor.time = orig_time

    def _execute(self, orig: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from kfp.local import status
        from kfp.local.orchestrator.orchestrator_utils import OrchestratorUtils

        task_name = kw["task_name"]
        node = self.task_names.get(task_name)
        if node is None:  # a helper task (gate field selector)
            return orig(*args, **kw)
        try:
            inputs = OrchestratorUtils.make_task_arguments(kw["task_spec"].inputs, kw["io_store"])
        except Exception:  # lineage is best-effort; never fail the run for it
            inputs = {}
        frag = fragment_path(self._ctx(), node)
        before = frag.stat().st_mtime_ns if frag.exists() else None
        rec = TaskRecord(node, "failed", {}, inputs, False, time.time(), 0.0)
        self.records[node] = rec
        self.current = node
        self.emit(node, "started", "")
        try:
            outputs, task_status = orig(*args, **kw)
        finally:
            self.current = None
            rec.ended = time.time()
        rec.status = "succeeded" if task_status == status.Status.SUCCESS else "failed"
        rec.outputs = dict(outputs or {})
        after = frag.stat().st_mtime_ns if frag.exists() else None
        # The shim writes a fragment whenever it runs; a success without one came from kfp's cache.
        rec.fragment_written = after != before
        rec.cached = rec.status == "succeeded" and not rec.fragment_written
        self.emit(node, "cached" if rec.cached else rec.status, f"{rec.ended - rec.started:.2f}s")
        return outputs, task_status

    def _dispatch(self, orig: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from kfp.local import status

        node = self.current
        rec = self.records.get(node or "")
        if rec is not None and rec.kfp_attempts > 0 and marker_path(self._ctx(), rec.node).exists():
            # kfp retries every failure; after a FATAL one the shim would refuse in seconds.
            # Locally we skip even those seconds (the shim's own check is tested separately).
            rec.stopped_by_marker += 1
            return {}, status.Status.FAILURE
        if rec is not None:
            rec.kfp_attempts += 1
        return orig(*args, **kw)

    def _sleep(self, seconds: float) -> None:
        node = self.current
        if node and marker_path(self._ctx(), node).exists():
            return  # the retry will be refused at once: do not wait for it
        self.sleeper(seconds)

    def _ctx(self) -> Any:
        from interlock.core.runtime import RunContext

        return RunContext("", self.run_id, "kfp-local", self.state_dir)


class _Clock:
    """Stands in for the ``time`` module inside kfp.local's task executor."""

    def __init__(self, sleep: Callable[[float], None]):
        self.sleep = sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _child_pythonpath() -> str:
    # The component subprocess must import the team's modules exactly as this process does.
    paths = [str(Path(p or ".").resolve()) for p in sys.path if Path(p or ".").exists()]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return os.pathsep.join([*extra, *paths])


def _kfp_params(spec: PipelineSpec, params: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for p in spec.params:
        if p.name not in params:
            continue
        value = params[p.name]
        # A dataclass parameter may arrive as the instance or as its JSON object already.
        value = value if isinstance(value, dict) else to_jsonable(value, p.type)
        if value is None and not json_text(p.type):
            continue
        out[p.name] = encode(value, p.type)
    return out


@dataclass
class KfpLocalRun:
    """One kfp-local run: directories and what came out."""

    spec: PipelineSpec
    options: RunOptions
    kfp_options: KfpOptions

    @property
    def state_dir(self) -> Path:
        return self.options.run_dir / "state"

    @property
    def pipeline_root(self) -> Path:
        # Shared by runs of this workdir: kfp's cache entries point at earlier runs' outputs.
        return self.options.workdir / "kfp" / "root"

    @property
    def cache_root(self) -> Path:
        return self.options.cache_dir / "kfp"

    def execute(self, params: dict[str, Any]) -> RunResult:
        with _RUN_LOCK:
            return self._execute(params)

    def _execute(self, params: dict[str, Any]) -> RunResult:
        from kfp import local

        spec, options = self.spec, self.options
        started = time.time()
        built = build_pipeline(spec, self.kfp_options)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.pipeline_root.mkdir(parents=True, exist_ok=True)
        workspace = options.run_dir / "kfp-workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        local.init(
            runner=local.SubprocessRunner(use_venv=False),
            pipeline_root=str(self.pipeline_root),
            workspace_root=str(workspace),
            raise_on_error=False,
            enable_caching=options.cache,
            cache_root=str(self.cache_root),
        )
        observer = _TaskObserver(built.task_names, self.state_dir, options.run_id, options.sleeper, options.emit)
        env = {
            "INTERLOCK_RUN_ID": options.run_id,
            "INTERLOCK_STATE_DIR": str(self.state_dir.resolve()),
            "INTERLOCK_BACKEND": "kfp-local",
            "PYTHONPATH": _child_pythonpath(),
        }
        crashed: Exception | None = None
        with _environ(env), observer.installed(), warnings.catch_warnings():
            # Resources and display names compile for the cluster; kfp.local warns per task.
            warnings.filterwarnings("ignore", message=r".*no effect in the current local runner.*")
            try:
                built.pipeline(**_kfp_params(spec, params))
            except Exception as exc:  # kfp raises for orchestration problems, not task failures
                log.error("kfp-local run %s: %s", options.run_id, exc)
                crashed = exc
        return self._result(params, observer, started, crashed)

    def _result(
        self, params: dict[str, Any], observer: _TaskObserver, started: float, crashed: Exception | None = None,
    ) -> RunResult:
        spec, options = self.spec, self.options
        steps: dict[str, StepOutcome] = {}
        error: StepFailed | None = None
        failed_any = False
        for node in spec.nodes:
            rec = observer.records.get(node.name)
            frag = _fragment(self.state_dir, node.name)
            if rec is None:
                steps[node.name] = StepOutcome("not-run")
                continue
            attempts = len(frag.get("attempts", [])) if not rec.cached else 0
            duration = rec.ended - rec.started
            if rec.cached:
                steps[node.name] = StepOutcome("cached", cached=True, duration_s=duration)
            elif rec.status == "succeeded":
                steps[node.name] = StepOutcome("succeeded", attempts=attempts, duration_s=duration)
            else:
                failed_any = True
                failure = _last_failure(frag)
                marker = marker_path(observer._ctx(), node.name)
                if not rec.fragment_written and marker.exists():
                    # The shim refused at once: this node failed FATAL earlier in this run.
                    prior = _read_json(marker).get("failure") or failure
                    failure = {**prior, "reason": f"already failed FATAL earlier in run {options.run_id}: {prior.get('reason')}"}
                steps[node.name] = StepOutcome("failed", attempts=attempts, failure=failure, duration_s=duration)
                if error is None:
                    error = _step_failed(spec, node.name, failure, attempts)
        status = "failed" if failed_any or crashed else "succeeded"
        # Nodes kfp never started: behind a closed gate (run succeeded) or after a failure.
        for name, outcome in steps.items():
            if outcome.status == "not-run" and status == "succeeded":
                steps[name] = StepOutcome("skipped")
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend="kfp-local", state_dir=self.state_dir, params=params,
            status=status, statuses={k: v.status for k, v in steps.items()}, started=started,
            cached={k: v.cached for k, v in steps.items()},
            extra={"kfp": {
                "pipeline_root": str(self.pipeline_root),
                "cache_root": str(self.cache_root),
                "tasks": {r.node: {"kfp_attempts": r.kfp_attempts, "retries_stopped_by_fatal_marker": r.stopped_by_marker}
                          for r in observer.records.values()},
            }},
        )
        if error is None and crashed is not None:
            error = StepFailed(
                "?", "FATAL", f"kfp-local could not run the pipeline: {crashed}", pipeline=spec.name,
                hint="see the kfp log above",
            )
        if error is not None:
            error.receipt_path = str(receipt)
        outputs = {} if error else self._outputs(observer)
        record_lineage(spec, receipt, observer.records, workdir=options.workdir, enabled=KfpLocalOptions.of(options).lineage)
        return RunResult(spec.name, options.run_id, "kfp-local", status, outputs, steps, receipt, error)

    def _outputs(self, observer: _TaskObserver) -> dict[str, Any]:
        spec = self.spec
        types = dict(spec.output_types)
        out: dict[str, Any] = {}
        for name, b in spec.outputs:
            rec = observer.records.get(b.node or "")
            if rec is None or rec.status != "succeeded":
                continue  # behind a closed gate
            from .names import io_names

            _, names_out = io_names(spec.step_of(b.node or ""))
            raw = rec.outputs.get(names_out[b.port or ""])
            src = spec.step_of(b.node or "").output(b.port or "")
            out[name] = to_value(raw, b, types[name], src.type if src else None)
        return out


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        return {}


def _fragment(state_dir: Path, node: str) -> dict[str, Any]:
    return _read_json(state_dir / "receipts" / f"{node}.json")


def _last_failure(frag: dict[str, Any]) -> dict[str, Any]:
    failures = [a["failure"] for a in frag.get("attempts", []) if a.get("failure")]
    if failures:
        return failures[-1]
    return {"kind": "FATAL", "reason": "the task failed before the shim ran (see the kfp log above)", "hint": None}


def _step_failed(spec: PipelineSpec, node: str, failure: dict[str, Any], attempts: int) -> StepFailed:
    from interlock.core.failures import Failure

    err = StepFailed(
        node, failure.get("kind", "FATAL"), failure.get("reason", "failed"), hint=failure.get("hint"),
        attempts=max(attempts, 1), pipeline=spec.name,
    )
    with contextlib.suppress(Exception):
        err.failure = Failure.from_dict(failure)
    return err
