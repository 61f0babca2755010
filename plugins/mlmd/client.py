"""LineageStore: interlock's side of ML Metadata, talking to a worker in the mlmd venv.

ml-metadata needs protobuf<5 and kfp needs protobuf>=6, so the official library runs in a
separate interpreter (``worker.py``), started once per LineageStore and spoken to in JSON
lines. This module imports nothing from ml-metadata or protobuf.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import (
    SETUP_COMMAND,
    LineageConnectionError,
    LineageInputError,
    LineageNotFound,
    LineageStoreError,
    MlmdUnavailable,
)
from .model import LineageChain, RunSummary, chain_from_json, run_summary_from_json

WORKER_PATH = Path(__file__).with_name("worker.py")
PYTHON_ENV_VAR = "INTERLOCK_MLMD_PYTHON"
HOME_ENV_VAR = "INTERLOCK_HOME"
DEFAULT_GRPC_PORT = 8080  # KFP's metadata-grpc-service

_EOF = object()


def interlock_home() -> Path:
    """``$INTERLOCK_HOME``, else ``~/.cache/interlock``."""
    home = os.environ.get(HOME_ENV_VAR)
    return Path(home).expanduser() if home else Path.home() / ".cache" / "interlock"


def default_env_dir() -> Path:
    """Where ``interlock lineage --setup`` puts the ml-metadata virtualenv."""
    return interlock_home() / "mlmd-venv"


def venv_python(env_dir: str | os.PathLike[str]) -> Path:
    env = Path(env_dir)
    return env / "Scripts" / "python.exe" if os.name == "nt" else env / "bin" / "python"


def resolve_python(python: str | os.PathLike[str] | None = None) -> str:
    """The interpreter that runs the worker: ``python``, else ``$INTERLOCK_MLMD_PYTHON``,
    else the venv under ``$INTERLOCK_HOME``. Raises MlmdUnavailable when it is missing."""
    if python is not None:
        candidate, source = Path(python), "python="
    elif os.environ.get(PYTHON_ENV_VAR):
        candidate, source = Path(os.environ[PYTHON_ENV_VAR]), f"${PYTHON_ENV_VAR}"
    else:
        candidate, source = venv_python(default_env_dir()), "the default lineage venv"
    if not (candidate.is_file() and os.access(candidate, os.X_OK)):
        raise MlmdUnavailable(
            f"no ML Metadata interpreter at {candidate} (from {source})",
            hint=f"run `{SETUP_COMMAND}` to create {default_env_dir()} with ml-metadata, "
            f"or set {PYTHON_ENV_VAR} to a python that can `import ml_metadata`",
        )
    return str(candidate)


@dataclass
class RecordResult:
    """What ``record_run`` wrote: MLMD ids, and steps skipped because already recorded."""

    run_id: str
    pipeline: str
    run_context_id: int
    pipeline_context_id: int
    execution_ids: dict[str, int]
    artifact_ids: dict[str, int]  # uri -> artifact id
    recorded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class LineageStore:
    """ML Metadata store on SQLite (local runs) or a cluster's metadata gRPC service.

    >>> with LineageStore(sqlite_path="build/mlmd.sqlite") as store:   # doctest: +SKIP
    ...     store.record_run(run)
    ...     chain = store.upstream("file:///data/model")

    One worker process per store; calls are serialized and thread-safe. ``create=False``
    refuses to create a missing SQLite file (for queries). ``timeout`` bounds each call.
    """

    def __init__(
        self,
        sqlite_path: str | os.PathLike[str] | None = None,
        *,
        grpc_host: str | None = None,
        grpc_port: int | None = None,
        python: str | os.PathLike[str] | None = None,
        timeout: float = 120.0,
        grpc_timeout: float | None = 30.0,
        create: bool = True,
    ) -> None:
        if (sqlite_path is None) == (grpc_host is None):
            raise LineageInputError("give exactly one of sqlite_path or grpc_host")
        self.python = resolve_python(python)
        self.timeout = timeout
        args = [self.python, "-I", str(WORKER_PATH)]
        if sqlite_path is not None:
            path = Path(sqlite_path).expanduser().resolve()
            if not create and not path.is_file():
                raise LineageNotFound(
                    f"no lineage store at {path}: nothing has been recorded there yet",
                    hint="no run of this work directory has been recorded: runs on local and "
                    "flyte-local are recorded when `interlock lineage` is asked (check --workdir), "
                    "kfp-local runs as they end, once ml-metadata is set up (`interlock lineage "
                    "--setup`): a kfp-local run started before that recorded nothing, run it again "
                    "(cached steps make that quick)",
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            self.address = str(path)
            args += ["--sqlite", str(path)]
        else:
            port = int(grpc_port or DEFAULT_GRPC_PORT)
            self.address = f"{grpc_host}:{port}"
            args += ["--host", str(grpc_host), "--port", str(port)]
            if grpc_timeout:
                args += ["--timeout", str(grpc_timeout)]

        self._lock = threading.Lock()
        self._next_id = 0
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._lines: queue.Queue[Any] = queue.Queue()
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
        except OSError as exc:
            raise MlmdUnavailable(
                f"cannot start the ML Metadata worker with {self.python}: {exc}",
                hint=f"run `{SETUP_COMMAND}` or set {PYTHON_ENV_VAR}",
            ) from exc
        self._finalizer = weakref.finalize(self, _kill, self._proc)
        threading.Thread(target=_pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=_drain, args=(self._proc.stderr, self._stderr), daemon=True).start()
        hello = self._read(timeout=max(timeout, 30.0), what="start")
        if not hello.get("ready"):
            self.close()
            err = hello.get("error") or {}
            if err.get("kind") == "unavailable":
                raise MlmdUnavailable(
                    f"{self.python} cannot import ml_metadata: {err.get('message')}",
                    hint=f"run `{SETUP_COMMAND}` or point {PYTHON_ENV_VAR} at the mlmd venv",
                )
            raise _error(err, f"cannot open the metadata store at {self.address}")
        self.mlmd_version: str = hello.get("mlmd", "")

    # -- public API -------------------------------------------------------------

    def record_run(self, run: dict[str, Any]) -> RecordResult:
        """Record one pipeline run (plain JSON-able data, e.g. built from a receipt).

        Idempotent per step: a step already recorded for this run id is skipped.
        """
        _check_run(run)
        result = self._call("record_run", run)
        return RecordResult(**result)

    def upstream(
        self,
        target: str | None = None,
        *,
        uri: str | None = None,
        run_id: str | None = None,
        max_depth: int = 100,
    ) -> LineageChain:
        """Upstream lineage of an artifact URI or of a run id.

        ``target`` is guessed: a URI (``scheme://`` or an absolute path) is an artifact,
        anything else is tried as a run id and then as an artifact URI.
        """
        if sum(x is not None for x in (target, uri, run_id)) != 1:
            raise LineageInputError("give one of target, uri= or run_id=")
        if uri is not None:
            return self._upstream({"uri": uri, "max_depth": max_depth})
        if run_id is not None:
            return self._upstream({"run_id": run_id, "max_depth": max_depth})
        assert target is not None
        if "://" in target or target.startswith("/"):
            return self._upstream({"uri": target, "max_depth": max_depth})
        try:
            return self._upstream({"run_id": target, "max_depth": max_depth})
        except LineageNotFound:
            try:
                return self._upstream({"uri": target, "max_depth": max_depth})
            except LineageNotFound:
                raise LineageNotFound(
                    f"{target!r} is neither a run id nor an artifact URI in {self.address}",
                    hint="list runs with LineageStore.runs(); artifact URIs are full, "
                    "e.g. file:///abs/path or s3://bucket/key",
                ) from None

    def runs(self, pipeline: str | None = None) -> list[RunSummary]:
        """Recorded runs (``system.PipelineRun`` contexts), oldest first."""
        return [run_summary_from_json(r) for r in self._call("runs", {"pipeline": pipeline})]

    @property
    def worker_pid(self) -> int:
        """The worker process (one per store, started once)."""
        return self._proc.pid

    def ping(self) -> str:
        return str(self._call("ping", {})["mlmd"])

    def close(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is None:
            return
        if proc.poll() is None:
            try:
                with self._lock:
                    assert proc.stdin is not None
                    proc.stdin.write(json.dumps({"id": -1, "cmd": "shutdown"}) + "\n")
                    proc.stdin.flush()
                proc.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self._finalizer()

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------

    def _upstream(self, args: dict[str, Any]) -> LineageChain:
        return chain_from_json(self._call("upstream", args))

    def _call(self, cmd: str, args: dict[str, Any]) -> Any:
        with self._lock:
            if self._proc.poll() is not None:
                raise LineageStoreError(
                    f"the ML Metadata worker has exited (status {self._proc.returncode})"
                    + self._stderr_tail()
                )
            self._next_id += 1
            req_id = self._next_id
            try:
                line = json.dumps({"id": req_id, "cmd": cmd, "args": args})
            except (TypeError, ValueError) as exc:
                raise LineageInputError(f"{cmd}: arguments are not JSON-able: {exc}") from exc
            try:
                self._proc.stdin.write(line + "\n")  # type: ignore[union-attr]
                self._proc.stdin.flush()  # type: ignore[union-attr]
            except (BrokenPipeError, OSError) as exc:
                raise LineageStoreError(
                    "the ML Metadata worker is gone" + self._stderr_tail()
                ) from exc
            reply = self._read(timeout=self.timeout, what=cmd)
        if reply.get("id") != req_id:
            raise LineageStoreError(f"{cmd}: out-of-order reply from the worker: {reply!r:.200}")
        if not reply.get("ok"):
            raise _error(reply.get("error") or {}, cmd)
        return reply.get("result")

    def _read(self, *, timeout: float, what: str) -> dict[str, Any]:
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            _kill(self._proc)
            raise LineageStoreError(
                f"{what}: no answer from the ML Metadata worker within {timeout:.0f}s; "
                "it was stopped" + self._stderr_tail(),
                hint=f"a gRPC store may be unreachable ({self.address})",
            ) from None
        if item is _EOF:
            self._proc.wait(timeout=5)
            raise LineageStoreError(
                f"{what}: the ML Metadata worker exited (status {self._proc.returncode})"
                + self._stderr_tail()
            )
        try:
            return json.loads(item)
        except ValueError as exc:
            raise LineageStoreError(f"{what}: garbled worker output: {item!r:.200}") from exc

    def _stderr_tail(self) -> str:
        tail = "".join(self._stderr).strip()
        return f"\n  worker stderr:\n{tail[-2000:]}" if tail else ""


def _pump(stream: Any, lines: queue.Queue[Any]) -> None:
    with stream:  # each reader thread closes its own pipe, at EOF
        for line in stream:
            lines.put(line)
    lines.put(_EOF)


def _drain(stream: Any, sink: collections.deque[str]) -> None:
    with stream:
        for line in stream:
            sink.append(line)


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=5)
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass


def _error(err: dict[str, Any], what: str) -> Exception:
    kind = err.get("kind")
    message = f"{what}: {err.get('message', 'unknown error')}"
    if kind == "not_found":
        return LineageNotFound(message)
    if kind == "connection":
        return LineageConnectionError(
            message,
            hint="check the metadata gRPC host/port (e.g. `kubectl port-forward "
            "svc/metadata-grpc-service -n kubeflow 8080:8080`)",
        )
    if kind == "invalid":
        return LineageInputError(message)
    if err.get("traceback"):
        message += "\n" + str(err["traceback"])
    return LineageStoreError(message)


def _check_run(run: Any) -> None:
    """Reject a malformed run record here, with a message that names the field."""
    if not isinstance(run, dict):
        raise LineageInputError(f"a run record is a dict, got {type(run).__name__}")
    for key in ("pipeline", "run_id"):
        if not isinstance(run.get(key), str) or not run[key]:
            raise LineageInputError(f"run record: {key!r} must be a non-empty string")
    steps = run.get("steps", [])
    if not isinstance(steps, list):
        raise LineageInputError("run record: 'steps' must be a list")
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("name"), str):
            raise LineageInputError(f"run record: steps[{i}] needs a string 'name'")
        for side in ("inputs", "outputs"):
            ports = step.get(side) or []
            if not isinstance(ports, list):
                raise LineageInputError(f"step {step['name']!r}: {side!r} must be a list")
            for port in ports:
                if (
                    not isinstance(port, dict)
                    or not isinstance(port.get("uri"), str)
                    or not port["uri"]
                ):
                    raise LineageInputError(
                        f"step {step['name']!r}: every {side[:-1]} needs a non-empty 'uri'"
                    )
        snaps = step.get("snapshots")
        if snaps is not None and not isinstance(snaps, list):
            raise LineageInputError(f"step {step['name']!r}: 'snapshots' must be a list")
