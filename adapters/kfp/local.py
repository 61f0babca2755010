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
import logging
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.errors import InterlockError, StepFailed
from interlock.core.base.status import Status
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult, Seen, settle
from interlock.core.record.receipt import assemble_receipt, prefetch_git_info
from interlock.core.run import live
from interlock.core.run.env import EnvName, RunEnv, exported, state_dir_of
from interlock.core.run.map_items import reports
from interlock.core.run.redact import Redactor
from interlock.core.run.runtime import DUPLICATE_SIGNAL_S
from interlock.core.run.state import RunState

from .compile import BuiltPipeline, build_pipeline
from .entry import to_value
from .fanout import ENUMERATED, collected_output, kfp_local_globals_kept, stopped
from .finally_task import with_finally
from .lineage import record_lineage
from .local_policy import LocalPolicy, driven, loop_tasks
from .output import TaskOutput, kfp_output
from .policies import KfpLocalOptions, KfpOptions
from .submap import body_nodes
from .types import run_parameters

log = logging.getLogger("interlock.kfp")

BACKEND = "kfp-local"

# After a task's process ended, how long its output may still take to arrive (a child it
# left running holds the pipe open: the run does not wait for that child).
TASK_OUTPUT_DRAIN_S = 0.5

# kfp.local keeps one global configuration and runs patch process-wide state (environ,
# kfp.local's task executor): one kfp-local run at a time per process.
_RUN_LOCK = threading.Lock()


@dataclass
class TaskRecord:
    node: str
    status: Status  # SUCCEEDED | FAILED, as kfp reported the task
    outputs: dict[str, Any]  # kfp output name -> value or kfp Artifact
    inputs: dict[str, Any]  # kfp input name -> value or kfp Artifact
    cached: bool
    started: float
    ended: float
    fragment_written: bool = False  # the shim ran the step (a receipt fragment was written)
    kfp_attempts: int = 0  # subprocesses kfp actually started for this task
    stopped_by_marker: int = 0  # kfp retries skipped because the shim gave up on the node (a stop marker)
    stopped: bool = False  # not started: the run was told to stop (SIGTERM, Ctrl-C) first
    detail: str | None = None  # why it failed before the shim ran, where interlock can tell


@dataclass
class _TaskObserver:
    """Wraps kfp.local's per-task executor and per-attempt dispatcher during one run."""

    task_names: dict[str, str]
    state: RunState
    sleeper: Callable[[float], None]
    emit: Callable[[str, str, str], None] = lambda node, event, detail: None
    records: dict[str, TaskRecord] = field(default_factory=dict)
    current: str | None = None
    stop_signal: str | None = None  # the run was told to stop: start no more tasks
    # kfp's executor logs the whole executor input (every parameter value) and kfp.local
    # prints each line of the task's output: those lines go through the one redactor.
    redactor: Redactor = field(default_factory=Redactor)
    mapped: frozenset[str] = frozenset()  # il.map nodes: one kfp task per item; told once, as a node
    # Every task kfp ended in failure (after its retries), items included: one of them means
    # the run failed, even where every fragment says its step succeeded (the task died after
    # the shim returned, e.g. writing its outputs).
    failed_tasks: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)  # il.map node -> its list's length, as it ran
    policy: LocalPolicy | None = None  # the pipeline's failure policy, kept whatever kfp.local's order
    spec: PipelineSpec | None = None  # for telling why a map's enumerate task failed (fields=)


    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        from kfp.local import subprocess_task_handler, task_dispatcher
        from kfp.local.orchestrator import task_executor

        missing = [
            f"{mod.__name__}.{attr}"
            for mod, attr in ((task_executor, "execute_single_task"), (task_executor, "time"),
                              (task_dispatcher, "run_single_task_implementation"),
                              (subprocess_task_handler, "run_local_subprocess"))
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
        orig_subprocess = subprocess_task_handler.run_local_subprocess

        def execute(*args: Any, **kw: Any) -> Any:
            return self._execute(orig_execute, *args, **kw)

        def dispatch(*args: Any, **kw: Any) -> Any:
            return self._dispatch(orig_dispatch, *args, **kw)

        task_executor.execute_single_task = execute
        task_dispatcher.run_single_task_implementation = dispatch
        task_executor.time = _Clock(self._sleep)  # kfp's retry backoff goes through our sleeper
        # kfp.local echoes a task's output with the builtin print: a module global shadows it.
        subprocess_task_handler.print = self._print
        subprocess_task_handler.run_local_subprocess = self._run_task_process
        try:
            yield
        finally:
            del subprocess_task_handler.print
            subprocess_task_handler.run_local_subprocess = orig_subprocess
            task_executor.execute_single_task = orig_execute
            task_dispatcher.run_single_task_implementation = orig_dispatch
            task_executor.time = orig_time

    def _run_task_process(self, full_command: list[str], env_vars: dict[str, str] | None = None) -> int:
        """kfp.local's ``run_local_subprocess``, except that the task ends when its process
        does: kfp's reads the task's output until the pipe closes, so a child the step left
        running in the background (``sleep 60 &``) held the run for as long as it lived. The
        local backend does not wait for such a child either."""
        import subprocess

        env = {**os.environ, **env_vars} if env_vars else None
        process = subprocess.Popen(full_command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   bufsize=1, env=env)
        done = threading.Event()  # set once the task's process has ended and its output drained

        def relay() -> None:
            assert process.stdout is not None
            with process.stdout:
                for line in iter(process.stdout.readline, ""):
                    if not done.is_set():  # a leftover child's late lines are no task's
                        self._print(line, end="")

        reader = threading.Thread(target=relay, name="interlock-kfp-task-output", daemon=True)
        reader.start()
        code = process.wait()
        reader.join(TASK_OUTPUT_DRAIN_S)  # the rest of the task's own output, if any is in flight
        done.set()
        self._print("\n")  # kfp's own separation after a task's lines
        return code

    def _print(self, *values: Any, **kw: Any) -> None:
        self.output.echo(*values, **kw)  # the step's relayed lines; kfp's own only when verbose

    @property
    def output(self) -> TaskOutput:
        if not hasattr(self, "_output"):
            self._output = TaskOutput(self.redactor)
        return self._output

    def _execute(self, orig: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from kfp.local import status
        from kfp.local.orchestrator.orchestrator_utils import OrchestratorUtils

        task_name = kw["task_name"]
        node = self.task_names.get(task_name)
        if node is None:  # a helper task (gate field selector, a map's enumerate task)
            outputs, task_status = orig(*args, **kw)
            mapped = self.task_names.get(ENUMERATED + task_name)
            if mapped is not None and isinstance((outputs or {}).get("Output"), list):
                self.sizes[mapped] = len(outputs["Output"])  # the map report counts every item
            elif mapped is not None and task_status != status.Status.SUCCESS:  # il.zip of unequal lists
                now = time.time()
                detail = None
                if self.spec is not None:  # fields=: a record without a field, named as local names it
                    from .fanout import fields_gap

                    try:
                        items = OrchestratorUtils.make_task_arguments(kw["task_spec"].inputs, kw["io_store"]).get("items")
                    except Exception:  # only the message depends on it
                        items = None
                    detail = fields_gap(self.spec, mapped, items)
                self.records[mapped] = TaskRecord(mapped, Status.FAILED, {}, {}, False, now, now, detail=detail)
                self.failed_tasks.append(task_name)
            return outputs, task_status
        try:
            inputs = OrchestratorUtils.make_task_arguments(kw["task_spec"].inputs, kw["io_store"])
        except Exception:  # lineage is best-effort; never fail the run for it
            inputs = {}
        if self.policy is not None and node not in self.records and not self.policy.may_start(node):
            return {}, status.Status.FAILURE  # after a failure, under the policy: not run
        frag = self.state.fragment_file(node)
        before = _mtime_ns(frag)
        rec = TaskRecord(node, Status.FAILED, {}, inputs, False, time.time(), 0.0)
        first = node not in self.records
        self.records[node] = rec
        self.current = node
        if first or node not in self.mapped:
            self.emit(node, "started", "")
        self.output.begin()
        try:
            outputs, task_status = orig(*args, **kw)
        finally:
            self.current = None
            rec.ended = time.time()
        rec.status = Status.SUCCEEDED if task_status == status.Status.SUCCESS else Status.FAILED
        if rec.status is Status.FAILED:
            self.failed_tasks.append(task_name)
            if self.policy is not None:
                self.policy.failed.append(node)
        rec.outputs = dict(outputs or {})
        after = _mtime_ns(frag)
        # The shim writes a fragment whenever it runs; a success without one came from kfp's cache.
        rec.fragment_written = after != before
        rec.cached = rec.status is Status.SUCCEEDED and not rec.fragment_written
        if rec.status is Status.FAILED and not rec.fragment_written:
            self.output.failed_before_the_step(node)
        if node not in self.mapped:  # a map's items end one by one: the node is told after the run
            self.emit(node, *self._ended(rec))
        return outputs, task_status

    def _ended(self, rec: TaskRecord) -> tuple[Status, str]:
        """What the live event says: the status and the time, or (a failure, a stop) what the
        step's fragment says of it, as on other backends. kfp reports a stopped task as failed."""
        if rec.status is not Status.FAILED:
            return (Status.CACHED if rec.cached else rec.status), f"{rec.ended - rec.started:.2f}s"
        frag = self.state.read_fragment(rec.node) if rec.fragment_written else None
        last = frag.attempts[-1] if frag and frag.attempts else None
        if frag is not None and frag.status is Status.STOPPED:  # the words of StepStopped's reason
            ckpt = frag.facts.get("checkpoint_at_stop")
            saved = f"checkpoint {ckpt} committed" if ckpt else "no checkpoint taken"
            return Status.STOPPED, f"stopped by {frag.facts.get('stopped_by') or self.stop_signal or 'a signal'} ({saved})"
        if last is not None and last.failure:
            return Status.FAILED, f"{last.failure.get('kind')}: {last.failure.get('reason')}"
        return Status.FAILED, f"{rec.ended - rec.started:.2f}s"

    def _dispatch(self, orig: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        from kfp.local import status

        node = self.current
        rec = self.records.get(node or "")
        if rec is not None and rec.kfp_attempts > 0 and self._stop_marked(rec.node):
            # kfp retries every failure; after a FATAL one (or a stop) the shim would refuse in seconds.
            # Locally we skip even those seconds (the shim's own check is tested separately).
            rec.stopped_by_marker += 1
            return {}, status.Status.FAILURE
        if rec is not None and self.stop_signal is not None:
            rec.stopped = rec.stopped or rec.kfp_attempts == 0
            return {}, status.Status.FAILURE
        if rec is not None:
            rec.kfp_attempts += 1
        return orig(*args, **kw)

    def _sleep(self, seconds: float) -> None:
        node = self.current
        if self.stop_signal is not None or (node and self._stop_marked(node)):
            return  # the retry will be refused at once: do not wait for it
        self.sleeper(seconds)

    def _stop_marked(self, node: str) -> bool:
        return stopped(self.state, node)  # the shim gave up on it (or, il.map, on one of its items)

    def seen(self) -> dict[str, Seen]:
        """What kfp did with each task it started, for settle()."""
        return {
            r.node: Seen(
                Status.STOPPED if r.stopped else Status.CACHED if r.cached else r.status, shim_ran=r.fragment_written,
                detail=self.stop_signal if r.stopped else None if r.fragment_written
                else r.detail or "the task failed before the shim ran (see the kfp log above)",
                duration_s=r.ended - r.started,
            )
            for r in self.records.values()
        }


def _mtime_ns(path: str) -> int | None:
    """When the file at ``path`` last changed; None if there is none (one stat, no Path)."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


@contextlib.contextmanager
def _stops_reach_the_task(observer: _TaskObserver) -> Iterator[None]:
    """SIGTERM / Ctrl-C during a kfp-local run: the running task stops (its shim checkpoints
    and records it STOPPED), kfp starts no other task, and the run ends with a receipt.

    A signal sent to this process alone (``kill``, ``timeout``, ``docker stop``, a
    supervisor's SIGINT) is passed on to the task; Ctrl-C reaches it from the terminal too.
    """
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        if observer.stop_signal is not None:
            if time.monotonic() - seen_at[0] < DUPLICATE_SIGNAL_S:
                return  # the same stop twice (`timeout` signals the process, then its group)
            raise KeyboardInterrupt  # a second signal: stop waiting for the task
        observer.stop_signal = signal.Signals(signum).name
        seen_at[0] = time.monotonic()
        log.warning("kfp-local: %s received; stopping the running task, starting no other", observer.stop_signal)
        # Passed on whatever the signal: SIGINT from a supervisor reaches this process alone,
        # and a terminal's Ctrl-C, which the task got too, arrives there twice within the
        # shim's duplicate window (one stop).
        for pid in _task_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signum)

    seen_at = [0.0]

    saved = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _task_pids() -> list[int]:
    """The kfp task processes under this one (``python -m kfp.dsl.executor_main``, started by
    kfp's ``sh -c`` wrapper, which would not pass a signal on), from /proc; none elsewhere."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(entry.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.parent.name))
    found, queue = [], list(children.get(os.getpid(), []))
    while queue:
        pid = queue.pop()
        queue.extend(children.get(pid, []))
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(argv[i:i + 2] == [b"-m", b"kfp.dsl.executor_main"] for i in range(len(argv) - 1)):
            found.append(pid)
    return found


class _Clock:
    """Stands in for the ``time`` module inside kfp.local's task executor."""

    def __init__(self, sleep: Callable[[float], None]):
        self.sleep = sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _child_pythonpath() -> str:
    # The component subprocess must import the team's modules exactly as this process does.
    # Absolute (the task runs elsewhere), not resolved: realpath walks every component of
    # every entry, each run, and a symlinked entry imports the same modules either way.
    paths = [os.path.abspath(p or ".") for p in sys.path if os.path.exists(p or ".")]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return os.pathsep.join([*extra, *paths])


# The compiled kfp pipelines of the last few specs run in this process: a rerun of the same
# pipeline object reuses its components and pipeline (as a kfp user's module-level
# @dsl.pipeline is compiled once), instead of generating and compiling them again. Keyed by
# the spec object (held here, so its id is not reused) and the compile options.
_BUILT: OrderedDict[tuple[int, KfpOptions], tuple[PipelineSpec, BuiltPipeline]] = OrderedDict()
_BUILT_MAX = 8


def built_for(spec: PipelineSpec, opts: KfpOptions) -> BuiltPipeline:
    """``build_pipeline(spec, opts)``, reused while the same spec object runs again."""
    try:
        key = (id(spec), opts)
        held = _BUILT.get(key)
    except TypeError:  # options holding something unhashable: build every time
        return build_pipeline(spec, opts)
    if held is not None and held[0] is spec:
        _BUILT.move_to_end(key)
        return held[1]
    built = build_pipeline(spec, opts)
    _BUILT[key] = (spec, built)
    while len(_BUILT) > _BUILT_MAX:
        _BUILT.popitem(last=False)
    return built


@dataclass
class KfpLocalRun:
    """One kfp-local run: directories and what came out."""

    spec: PipelineSpec
    options: RunOptions
    kfp_options: KfpOptions

    @property
    def state_dir(self) -> Path:
        return state_dir_of(self.options.run_dir)

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
        prefetch_git_info(spec)  # the receipt takes the code as the run starts (git, if needed, in a thread)
        built = built_for(spec, self.kfp_options)  # under _RUN_LOCK: one run at a time
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
        policy = LocalPolicy(spec, built.pipeline, built.task_names)
        observer = _TaskObserver(built.task_names, RunState(self.state_dir, options.run_id), options.sleeper, options.emit,
                                 redactor=Redactor.for_values(params),
                                 mapped=frozenset(n.name for n in spec.nodes if n.map is not None) | body_nodes(spec),
                                 policy=policy, spec=spec)
        env = {
            **RunEnv(run_id=options.run_id, state_dir=self.state_dir.resolve(), backend=BACKEND,
                     checkpoint_root=options.checkpoint_store).to_env(),
            "PYTHONPATH": _child_pythonpath(),
            EnvName.LIVE: live.RELAY_VERBOSE if live.verbose() else live.RELAY,  # the shim relays step lines
        }
        crashed: Exception | None = None
        with exported(env), observer.installed(), _stops_reach_the_task(observer), warnings.catch_warnings(), \
                kfp_local_globals_kept(), kfp_output(), driven(policy, loop_tasks(built.pipeline)):
            # Resources and display names compile for the cluster; kfp.local warns per task.
            warnings.filterwarnings("ignore", message=r".*no effect in the current local runner.*")
            try:
                self._returned = built.pipeline(**run_parameters(spec, params))
            except Exception as exc:  # kfp raises for orchestration problems, not task failures
                log.error("kfp-local run %s: %s", options.run_id, exc)
                crashed = exc
        return self._result(params, observer, started, crashed)

    def _result(
        self, params: dict[str, Any], observer: _TaskObserver, started: float, crashed: Exception | None = None,
    ) -> RunResult:
        spec, options = self.spec, self.options
        seen = observer.seen()
        body = body_nodes(spec)  # a step map in a mapped call's body: folded with the call's items below
        maps = {k: v for k, v in reports(spec, observer.state, observer.sizes).items() if k not in body}
        for name in maps:
            frag = observer.state.read_fragment(name)
            if frag is not None:
                seen[name] = Seen(frag.status)
        if spec.subs:  # il.map over a sub-pipeline: each call's items -> its body nodes (submap.py)
            from .submap import call_reports

            maps.update(call_reports(spec, observer.state, observer.sizes, seen))
        gates = self._gates(observer, params)
        outcome = settle(
            spec, observer.state, seen, gates=gates,
            failed=f"kfp-local could not run the pipeline: {crashed}" if crashed is not None else None,
        )
        outcome = with_finally(spec, observer.state, outcome, observer.seen(), gates)  # il.finally_, if any
        if outcome.error is None and observer.failed_tasks:
            tasks = ", ".join(sorted(set(observer.failed_tasks)))
            outcome = with_finally(spec, observer.state, settle(spec, observer.state, seen, gates=gates, failed=(
                f"kfp task(s) {tasks} failed after their step had succeeded (see the kfp log above)")), observer.seen(),
                gates)
        for name, report in maps.items():  # live progress: each map node once, as it settled
            if name in outcome.steps:
                options.emit(name, outcome.steps[name].status, f"{report.items if report else 0} item(s)")
        outputs = {} if outcome.error else self._outputs(observer)
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=BACKEND, state_dir=self.state_dir, params=params,
            status=outcome.status, statuses=outcome.statuses, started=started, outputs=outputs, gates=gates,
            extra={"kfp": {
                "pipeline_root": str(self.pipeline_root),
                "cache_root": str(self.cache_root),
                "tasks": {r.node: {"kfp_attempts": r.kfp_attempts, "retries_stopped_by_fatal_marker": r.stopped_by_marker}
                          for r in observer.records.values()},
            }},
        )
        error = outcome.error
        if error is not None:
            if crashed is not None and not isinstance(error, StepFailed):
                error.hint = "see the kfp log above"
            error.receipt_path = str(receipt)
        record_lineage(spec, receipt, observer.records, workdir=options.workdir, enabled=KfpLocalOptions.of(options).lineage)
        return RunResult(spec.name, options.run_id, BACKEND, outcome.status, outputs, outcome.steps, receipt, error,
                         maps=maps)

    def _gates(self, observer: _TaskObserver, params: dict[str, Any]) -> dict[str, bool]:
        """Each il.when condition whose values kfp produced, read from those nodes' outputs."""
        from interlock.core.model.codecs import revive
        from interlock.core.model.conditions import decide
        from interlock.core.model.graph import binding_type

        from .names import io_names

        def value_of(b: Any) -> Any:
            if b.kind == "param":
                p = self.spec.param(b.param or "")
                return revive(params[b.param or ""] if b.param in params else p.default, p.type)  # KeyError: undecided
            if b.kind != "output":
                return b.value
            rec = observer.records.get(b.node or "")
            if rec is None or rec.status is not Status.SUCCEEDED:
                raise KeyError(b.node)
            step = self.spec.step_of(b.node or "")
            _, names_out = io_names(step)
            port = step.output(b.port or "")
            t = binding_type(self.spec, b)
            raw = rec.outputs.get(names_out.get(b.port or "", ""))
            if port is None or t is None or raw is None:
                raise KeyError(b.node)
            return to_value(raw, b, t, port.type)

        values: dict[str, bool] = {}
        for g in self.spec.gates:
            try:
                decided = decide(g, value_of)
            except Exception as exc:  # an unreadable output leaves the gate undecided, never fails the run
                log.debug("gate %s: cannot read its condition: %s", g.id, exc)
                continue
            if decided is not None:
                values[g.id] = decided
        return values

    def _outputs(self, observer: _TaskObserver) -> dict[str, Any]:
        spec = self.spec
        types = dict(spec.output_types)
        out: dict[str, Any] = {}
        for name, b in spec.outputs:
            while b.kind == "one_of":  # il.branch_value: the option whose branch ran (a nested chain: its own)
                ran = [o for o in b.options if any((r := observer.records.get(n)) and r.status is Status.SUCCEEDED
                                                   for n in o.nodes())]
                b = ran[0] if ran else b.options[0]
            rec = observer.records.get(b.node or "")
            if rec is None or rec.status is not Status.SUCCEEDED:
                continue  # behind a closed gate
            from .names import io_names

            if spec.node(b.node or "").map is not None or b.node in body_nodes(spec):  # a task record: one iteration; the
                out[name] = collected_output(spec, getattr(self, "_returned", None), name, b, types[name])
                continue  # pipeline's own output holds the dsl.Collected list

            _, names_out = io_names(spec.step_of(b.node or ""))
            raw = rec.outputs.get(names_out[b.port or ""])
            src = spec.step_of(b.node or "").output(b.port or "")
            out[name] = to_value(raw, b, types[name], src.type if src else None)
        return out
