"""What a person watching a run sees: one line per step event, each step's own output and
log records as they happen (prefixed with the step), a heartbeat for a long step (how long it
has run, what it last said, how far it says it is), and the summary at the end.

The same on every backend: step lines come from ``core.live`` (in-process, or relayed by a
task subprocess), progress from the metrics seam (``<state>/metrics/<node>.jsonl``, which
every backend's shim writes). On a terminal with ``rich`` installed the running steps stay
in a live footer; elsewhere (CI logs, pipes, no rich) plain lines without colour codes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.core.base.status import Status
from interlock.core.record.efficiency import receipt_line
from interlock.core.run import live
from interlock.core.run.live import LOG, STDOUT
from interlock.core.run.live_line import StepLine
from interlock.core.run.metrics import PROGRESS, MetricPoint, metrics_path

HEARTBEAT_S = 10.0  # a step silent this long gets a line saying it still runs
MARKS = {"started": "..", Status.SUCCEEDED: "ok", Status.CACHED: "==", Status.SKIPPED: "--",
         Status.FAILED: "!!", Status.STOPPED: "[]", Status.NOT_RUN: "  "}
ENDED = {Status.SUCCEEDED, Status.CACHED, Status.SKIPPED, Status.FAILED, Status.STOPPED, Status.NOT_RUN}
_STYLES = {"ok": "green", "==": "cyan", "--": "dim", "!!": "bold red", "[]": "yellow", "..": "blue"}


def rich_available() -> bool:
    return importlib.util.find_spec("rich") is not None


class _Tail:
    """The last progress point of one step, read incrementally from its metrics file."""

    def __init__(self, state_dir: Path, node: str):
        # The path is made at the first poll (a heartbeat, the live footer): most steps end
        # before one, and a step's "started" line should not pay for building it.
        self.state_dir, self.node, self.offset = state_dir, node, 0
        self._path: Path | None = None
        self.last: MetricPoint | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = metrics_path(self.state_dir, self.node)
        return self._path

    def poll(self) -> MetricPoint | None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self.last
        end = chunk.rfind(b"\n") + 1  # a torn last line waits for its newline
        self.offset += end
        for raw in chunk[:end].splitlines():
            try:
                point = MetricPoint.from_dict(json.loads(raw))
            except (ValueError, TypeError):
                continue
            if point.kind == PROGRESS:
                self.last = point
        return self.last


@dataclass
class _Running:
    started: float
    shown: float  # when this step last had a line on screen (its heartbeat clock)
    tail: _Tail | None
    beat: float = 0.0  # when its last heartbeat was shown
    last_line: str = ""
    progress: MetricPoint | None = None
    lines: int = field(default=0)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.3g}"


def _secs(s: float) -> str:
    return f"{s:.1f}s" if s < 10 else f"{s:.0f}s" if s < 120 else f"{int(s // 60)}m{int(s % 60):02d}s"


def describe_progress(point: MetricPoint | None) -> str:
    if point is None:
        return ""
    if point.of:
        return f"{point.name} {_num(point.value)}/{_num(point.of)} ({100 * point.value / point.of:.0f}%)"
    return f"{point.name} {_num(point.value)}"


class RunConsole:
    """The run's console; pass it as ``il.run(..., progress=RunConsole(...))``.

    ``verbose``: also show foreign libraries' output (kfp's executor log, MLflow's INFO
    lines). ``heartbeat_s``: how long a step may be silent before a line says it still runs.
    ``style``: "auto" (rich on a terminal when installed), "rich" or "plain". Plain lines go
    to ``stream`` (default stderr), except what steps print to stdout: that goes to ``out``
    (default stdout), as it would without interlock.
    """

    def __init__(self, stream: Any = None, *, out: Any = None, verbose: bool = False,
                 heartbeat_s: float = HEARTBEAT_S, style: str = "auto"):
        if style not in ("auto", "rich", "plain"):
            raise ValueError(f"RunConsole style must be 'auto', 'rich' or 'plain', not {style!r}")
        self.stream, self.out = stream, out  # None: sys.stderr / sys.stdout when printing
        self.verbose, self.heartbeat_s, self.style = verbose, float(heartbeat_s), style
        self.t0 = time.monotonic()
        self._running: dict[str, _Running] = {}
        self._state_dir: Path | None = None
        self._lock = threading.RLock()
        self._rich: Any = None  # rich Console while watching in rich style
        self._live: Any = None
        self._start_beat: Callable[[], None] | None = None  # while watching, until the first step starts

    # -- where lines go --------------------------------------------------------------------
    def _err(self) -> Any:
        return live.real(self.stream or sys.stderr)

    def _stdout(self) -> Any:
        return live.real(self.out or sys.stdout)

    def uses_rich(self) -> bool:
        if self.style == "plain":
            return False
        if self.style == "auto":  # rich only on a terminal
            isatty = getattr(self._err(), "isatty", None)
            if not (isatty and isatty()) or os.environ.get("TERM") == "dumb":
                return False
        return rich_available()

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self.t0:6.1f}s]"

    def _emit(self, text: str, *, to_stdout: bool = False, style: str | None = None, mark: str = "") -> None:
        with self._lock:
            if self._rich is not None:
                from rich.text import Text

                line = Text()
                line.append(self._stamp() + " ", style="dim")
                if mark:
                    line.append(mark, style=_STYLES.get(mark, ""))
                    line.append(" ")
                line.append(text, style=style or "")
                self._rich.print(line, soft_wrap=True, highlight=False)
                return
            target = self._stdout() if to_stdout else self._err()
            # write, not print: kfp.local swaps builtins.print for an indenting one while a task runs
            target.write(f"{self._stamp()} {mark + ' ' if mark else ''}{text}\n")
            target.flush()

    # -- the progress callback (step events) -----------------------------------------------
    def __call__(self, node: str, event: str, detail: str) -> None:
        mark = MARKS.get(event, "  ")
        with self._lock:
            now = time.monotonic()
            if event == "started":
                tail = _Tail(self._state_dir, node) if self._state_dir else None
                self._running[node] = _Running(now, now, tail)
                if self._start_beat is not None:
                    self._start_beat()
                    self._start_beat = None
            elif event in ENDED:
                self._running.pop(node, None)
            self._emit(f"{node:<24} {event}{'  ' + detail if detail else ''}", mark=mark)

    # -- the sink (step lines) -------------------------------------------------------------
    def line(self, line: StepLine) -> None:
        if line.stream == LOG and line.level == "DEBUG" and not self.verbose:
            return
        with self._lock:
            run = self._running.get(line.node)
            if run is not None:
                run.shown, run.last_line = time.monotonic(), line.text
                run.lines += 1
            label = f"{line.level} " if line.stream == LOG and line.level not in ("", "INFO") else ""
            who = line.node or line.logger or "interlock"
            style = "red" if line.level in ("ERROR", "CRITICAL") else "yellow" if line.level == "WARNING" else None
            self._emit(f"   {who} | {label}{line.text}", to_stdout=line.stream == STDOUT, style=style)

    # -- heartbeat ---------------------------------------------------------------------------
    def heartbeat(self) -> None:
        """One line per step that has been silent for ``heartbeat_s`` (plain style)."""
        with self._lock:
            now = time.monotonic()
            for node, run in list(self._running.items()):
                point = run.tail.poll() if run.tail else None
                # Quiet for a while, or chatty but further along than the last beat said.
                moved = point is not None and point != run.progress and now - run.beat >= self.heartbeat_s
                if now - run.shown < self.heartbeat_s and not moved:
                    continue
                run.shown = run.beat = now
                run.progress = point
                parts = [f"running {_secs(now - run.started)}"]
                if run.progress is not None:
                    parts.append(describe_progress(run.progress))
                if run.last_line:
                    parts.append(f"last: {run.last_line[:120]}")
                self._emit(f"{node:<24} {'  '.join(parts)}", mark="..")

    def _footer(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 1))
        now = time.monotonic()
        with self._lock:
            for node, run in self._running.items():
                run.progress = run.tail.poll() if run.tail else None
                bar = describe_progress(run.progress)
                grid.add_row(
                    Text("..", style="blue"), Text(node, style="bold"), Text(f"{_secs(now - run.started):>6}", style="dim"),
                    Text(bar, style="cyan"), Text(run.last_line[:80], style="dim"),
                )
        return grid

    @contextmanager
    def watching(self, state_dir: str | os.PathLike[str] | None = None) -> Iterator[RunConsole]:
        """For one run: receive its step lines, quiet foreign loggers (unless verbose), beat."""
        self._state_dir = Path(state_dir) if state_dir else None
        remove = live.add_sink(self.line)
        stop = threading.Event()
        beat: threading.Thread | None = None
        with live.verbosity(self.verbose), live.quiet_foreign():
            try:
                if self.uses_rich():
                    from rich.console import Console
                    from rich.live import Live

                    self._rich = Console(file=self._err())
                    self._live = Live(get_renderable=self._footer, console=self._rich, refresh_per_second=4,
                                      transient=True)
                    self._live.start()
                else:
                    tick = max(0.05, min(1.0, self.heartbeat_s / 4))

                    def loop() -> None:
                        while not stop.wait(tick):
                            self.heartbeat()

                    def start_beat() -> None:
                        # At the first step that starts: a beat is about running steps, and a
                        # run served all from the cache has none (no thread to start and join).
                        nonlocal beat
                        beat = threading.Thread(target=loop, name="interlock-heartbeat", daemon=True)
                        beat.start()

                    self._start_beat = start_beat
                yield self
            finally:
                with self._lock:
                    self._start_beat = None
                stop.set()
                if beat is not None:
                    beat.join()
                if self._live is not None:
                    self._live.stop()
                    self._live = None
                self._rich = None
                remove()
                self._running.clear()

    def summary(self, result: Any, wall_s: float) -> None:
        """The closing line il.run prints (the CLI prints its own, with the outputs)."""
        where = f"(run {result.run_id}, backend {result.backend})"
        self._emit(f"{result.pipeline}: {result.status} in {wall_s:.1f}s  {where}", mark=MARKS.get(result.status, "  "))
        if result.receipt_path:
            self._emit(f"   receipt: {result.receipt_path}")
            if line := receipt_line(result.receipt_path):
                self._emit(f"   {line}")
