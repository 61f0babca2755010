"""A running step's own output, as it happens, tagged with the step: the seam live progress
is built on, the same on every backend.

While the shim runs a step (``capture(node)``), what the step prints (``sys.stdout``,
``sys.stderr``) and the log records it emits (``ctx.log``, the team's own loggers) become
``StepLine``s handed to the sinks registered in this process (the run's console). A step
that runs in another process (kfp-local's task subprocesses) relays them: with
``INTERLOCK_LIVE`` set, each line goes to the task's stdout as one tagged JSON line, and the
parent decodes it (``decode``) and publishes it to its own sinks. With no sink and no relay
(a plain call, a pod on a cluster), nothing is redirected: output goes where it always did.

Foreign libraries' chatter (MLflow's table creation, flytekit, kfp, urllib3, ...) is kept
below WARNING while a run is watched, unless the run is verbose (``verbosity(True)``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from interlock.core.run.env import EnvName

if TYPE_CHECKING:
    from interlock.core.run.live_line import StepLine

STDOUT, STDERR, LOG = "stdout", "stderr", "log"
RELAY, RELAY_VERBOSE = "relay", "relay-verbose"  # values of INTERLOCK_LIVE
STEP_LOGGER = "interlock.step"  # ctx.log is interlock.step.<node>
TAG = "\x1finterlock-line\x1f"  # starts a relayed line; never in ordinary output

# Loggers of libraries a step uses whose INFO lines are noise to a person watching a run.
QUIET_LOGGERS = (
    "mlflow", "alembic", "huey", "urllib3", "flytekit", "kfp", "botocore", "boto3", "s3transfer", "fsspec",
    "s3fs", "aiobotocore", "filelock", "git", "httpx", "httpcore", "sqlalchemy", "asyncio", "numexpr",
    "matplotlib", "PIL", "torch.distributed", "pandera",
)
# MLflow configures its own handler (not propagating) at import: it reads its level from here.
_ENV_LEVELS = {"MLFLOW_LOGGING_LEVEL": "WARNING"}


def _step_line() -> type[StepLine]:
    """The StepLine class (imported here: live_line.py imports this module)."""
    from interlock.core.run.live_line import StepLine

    return StepLine




def decode(text: str) -> StepLine | None:
    """The relayed line in ``text`` (one line of a task's output), else None."""
    start = text.find(TAG)
    if start < 0:
        return None
    try:
        return _step_line()(**json.loads(text[start + len(TAG):]))
    except (ValueError, TypeError):
        return None


Sink = Callable[["StepLine"], None]
_sinks: list[Sink] = []
_lock = threading.RLock()
_verbose = False
_thread = threading.local()  # .node: the step this thread runs; .busy: inside publish


def add_sink(fn: Sink) -> Callable[[], None]:
    """Send every step line of this process to ``fn``; returns a function that removes it."""
    with _lock:
        _sinks.append(fn)
    return lambda: _remove_sink(fn)


def _remove_sink(fn: Sink) -> None:
    with _lock:
        if fn in _sinks:
            _sinks.remove(fn)


def relay_mode() -> str | None:
    value = os.environ.get(EnvName.LIVE, "")
    return value if value in (RELAY, RELAY_VERBOSE) else None


def verbose() -> bool:
    """Show foreign libraries' output (kfp's executor log, MLflow's INFO lines)?"""
    return _verbose or relay_mode() == RELAY_VERBOSE


@contextmanager
def verbosity(on: bool) -> Iterator[None]:
    global _verbose
    saved, _verbose = _verbose, on
    try:
        yield
    finally:
        _verbose = saved


def publish(line: StepLine, *, relay: bool = True) -> None:
    """Hand ``line`` to the sinks; relay it (a task subprocess); else print it plainly.
    ``relay=False``: a line already relayed to this process (never tag it again)."""
    busy = getattr(_thread, "busy", False)
    _thread.busy = True  # a sink that prints must not be captured again
    try:
        with _lock:
            sinks = list(_sinks)
        if sinks and not busy:
            for fn in sinks:
                fn(line)
        elif relay and relay_mode() and not busy:
            out = real(sys.stdout)
            out.write(line.encode() + "\n")
            out.flush()
        else:
            out = real(sys.stdout if line.stream == STDOUT else sys.stderr)
            out.write(_plain(line) + "\n")
            out.flush()
    finally:
        _thread.busy = busy


def _plain(line: StepLine) -> str:
    return f"{line.level} {line.text}" if line.stream == LOG and line.level not in ("", "INFO") else line.text


def real(stream: Any) -> TextIO:
    """The stream under any router: where a console writes without being captured itself."""
    while isinstance(stream, _Router):
        stream = stream.original
    return stream


def current_node() -> str | None:
    """The step this thread runs; a thread the step started belongs to it when it runs alone."""
    node = getattr(_thread, "node", None)
    if node is None and len(_active) == 1:
        node = next(iter(_active))
    return node


class _Router:
    """Stands in for ``sys.stdout`` / ``sys.stderr`` while steps are captured: a complete
    line written by a step's thread becomes a StepLine; anything else passes through."""

    def __init__(self, original: TextIO, stream: str):
        self.original, self.stream = original, stream
        self._pending: dict[tuple[int, str], str] = {}

    def write(self, text: str) -> int:
        node = current_node()
        if node is None or getattr(_thread, "busy", False):
            return self.original.write(text)
        key = (threading.get_ident(), node)
        with _lock:
            *lines, rest = (self._pending.pop(key, "") + text).split("\n")
            if rest:
                self._pending[key] = rest
        for raw in lines:
            publish(_step_line()(node, _visible(raw), self.stream, at=time.time()))
        return len(text)

    def end(self, node: str) -> None:
        """The step ended: what it printed without a newline is a line too."""
        with _lock:
            rest = self._pending.pop((threading.get_ident(), node), "")
        if rest:
            publish(_step_line()(node, _visible(rest), self.stream, at=time.time()))

    def flush(self) -> None:
        self.original.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...: the real stream's
        return getattr(self.original, name)


def _visible(raw: str) -> str:
    """What a terminal would show of a line: after its last carriage return (progress bars)."""
    raw = raw.rstrip("\r")
    return raw.rsplit("\r", 1)[-1]


class _LogHandler(logging.Handler):
    """Log records of a captured step become its lines; others (no step) only when WARNING+,
    as Python's last-resort handler would have printed them, which this handler replaces."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(_thread, "busy", False):
            return
        node = current_node() or ""
        if not node and record.levelno < logging.WARNING and not verbose():
            return
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001 - a bad format string must not fail the step
            text = str(record.msg)
        for part in text.splitlines() or [""]:
            publish(_step_line()(node, part, LOG, record.levelname, record.name, record.created))


_HANDLER: list[_LogHandler] = []


def _log_handler() -> _LogHandler:
    """One handler for the process: it keeps no state of its own (the node comes from the
    thread), and making one (its lock, its formatter, its weak reference in logging's list)
    was a tenth of installing the capture, which happens at every step."""
    if not _HANDLER:
        _HANDLER.append(_LogHandler())
    return _HANDLER[0]


_active: dict[str, int] = {}  # node -> threads capturing it
_installed: dict[str, Any] = {}
_holds = 0  # open ``held()`` blocks: the capture stays installed between their steps


def _set_levels(levels: dict[logging.Logger, int]) -> None:
    for lg, level in levels.items():
        if lg.level != level:
            lg.setLevel(level)


def _install() -> None:
    """Routers on stdout/stderr and a handler on the root logger, while any step is captured."""
    root = logging.getLogger()
    handler = _log_handler()
    _installed.update(stdout=sys.stdout, stderr=sys.stderr, handler=handler, root_level=root.level)
    sys.stdout = _Router(sys.stdout, STDOUT)
    sys.stderr = _Router(sys.stderr, STDERR)
    levels: dict[logging.Logger, int] = {}
    # Unconfigured logging drops INFO: a step's ctx.log.info is meant to be seen.
    if not [h for h in root.handlers if not isinstance(h, _LogHandler)] and root.level > logging.INFO:
        levels[root] = logging.INFO
    # ctx.log's records pass even where logging is configured at WARNING (the user's own loggers follow it).
    steps = logging.getLogger(STEP_LOGGER)
    _installed["step_level"] = steps.level
    if steps.level == logging.NOTSET:
        levels[steps] = logging.INFO
    root.addHandler(handler)
    _installed["quiet"] = quiet_foreign_start(levels)


def _uninstall() -> None:
    root = logging.getLogger()
    root.removeHandler(_installed["handler"])
    levels = {root: _installed["root_level"], logging.getLogger(STEP_LOGGER): _installed["step_level"]}
    quiet_foreign_end(_installed["quiet"], levels)
    for name in (STDOUT, STDERR):
        if isinstance(getattr(sys, name), _Router):  # leave a stream someone else set since alone
            setattr(sys, name, _installed[name])
    _installed.clear()


def watched() -> bool:
    """Is anyone watching this process's steps (a sink here, or a parent through the relay)?"""
    with _lock:
        return bool(_sinks) or relay_mode() is not None


@contextmanager
def capture(node: str) -> Iterator[None]:
    """Make what ``node`` prints and logs on this thread its StepLines (the shim wraps each
    call of a step in this); nothing changes when nobody is watching."""
    if not watched():
        yield
        return
    with _lock:
        if not _installed:
            _install()
        _active[node] = _active.get(node, 0) + 1
    saved = getattr(_thread, "node", None)
    _thread.node = node
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, _Router):
                stream.end(node)
        _thread.node = saved
        with _lock:
            _active[node] -= 1
            if not _active[node]:
                del _active[node]
            if not _active and not _holds:
                _uninstall()


@contextmanager
def held() -> Iterator[None]:
    """Keep the capture installed from a block's first captured step to its end, instead of
    installing and removing it around each step (a flyte-local run calls its steps one after
    another in this process). Between the steps nothing is captured (no node is active: prints pass through, records without a step are dropped
    below WARNING as before)."""
    global _holds
    with _lock:
        _holds += 1
    try:
        yield
    finally:
        with _lock:
            _holds -= 1
            if not _holds and not _active and _installed:
                _uninstall()


@dataclass
class _Quiet:
    levels: dict[str, int]
    env: dict[str, str | None]


def quiet_foreign_start(levels: dict[logging.Logger, int] | None = None) -> _Quiet:
    """Foreign libraries' loggers at WARNING (unless verbose); MLflow's own setting too.
    ``levels``: other loggers' levels to set first (a foreign logger's effective level
    follows root's)."""
    quiet = _Quiet({}, {})
    _set_levels(levels or {})
    if verbose():
        return quiet
    quieted: dict[logging.Logger, int] = {}
    for name, lg in _quiet_loggers():
        if lg.getEffectiveLevel() < logging.WARNING or lg.level < logging.WARNING:
            quiet.levels[name] = lg.level
            quieted[lg] = logging.WARNING
    _set_levels(quieted)
    for key, value in _ENV_LEVELS.items():
        if key not in os.environ:  # the user's own setting wins
            quiet.env[key] = None
            os.environ[key] = value
    return quiet


def _quiet_loggers() -> list[tuple[str, logging.Logger]]:
    return [(name, logging.getLogger(name)) for name in QUIET_LOGGERS]


def quiet_foreign_end(quiet: _Quiet, levels: dict[logging.Logger, int] | None = None) -> None:
    levels = {} if levels is None else levels
    known = dict(_quiet_loggers())
    for name, level in quiet.levels.items():
        levels[known.get(name) or logging.getLogger(name)] = level
    _set_levels(levels)
    for key in quiet.env:
        os.environ.pop(key, None)


@contextmanager
def quiet_foreign() -> Iterator[None]:
    quiet = quiet_foreign_start()
    try:
        yield
    finally:
        quiet_foreign_end(quiet)
