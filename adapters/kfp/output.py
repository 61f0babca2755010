"""What kfp-local shows while it runs: the steps' own lines, not kfp's.

kfp.local echoes every line a task subprocess writes (the executor's INFO log, the whole
executor input as JSON, the step's prints) and logs its own progress on the root logger
with colour codes, even into a pipe. The task's shim relays the step's lines tagged
(core/run/live.py, ``INTERLOCK_LIVE``): those are published to the run's console; the rest is
kfp's, shown only when the run is verbose, without colour codes unless on a terminal.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from interlock.core.run import live
from interlock.core.run.live_line import StepLine
from interlock.core.run.redact import Redactor

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _colour() -> bool:
    isatty = getattr(live.real(sys.stdout), "isatty", None)
    return bool(isatty and isatty())


KEEP_LINES = 60  # of a task's own kfp log, shown when it fails before the step runs


class TaskOutput:
    """Stands in for the ``print`` kfp.local echoes a task's output lines with: the step's
    relayed lines go to the run's console; kfp's own are shown only when the run is verbose,
    and otherwise kept (the last KEEP_LINES) in case the task fails before the step runs."""

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self.kept: deque[str] = deque(maxlen=KEEP_LINES)

    def begin(self) -> None:
        self.kept.clear()

    def echo(self, *values: Any, **kw: Any) -> None:
        text = "".join(str(v) for v in values)  # kfp passes one line at a time
        line = live.decode(text.rstrip("\n"))
        if line is not None:
            live.publish(replace(line, text=self.redactor.text(line.text)), relay=False)
        elif live.verbose():
            print(self.redactor.text(text if _colour() else _ANSI.sub("", text)), **kw)
        elif text.strip():
            self.kept.append(text.rstrip("\n"))  # redacted if ever shown (most tasks never fail before the step)

    def failed_before_the_step(self, node: str) -> None:
        """The task failed and its shim never ran: kfp's log is all there is to go on."""
        if live.verbose() or not self.kept:
            return
        live.publish(StepLine(node, "the task failed before the step ran; kfp's log of it:", live.STDERR), relay=False)
        for text in self.kept:
            live.publish(StepLine(node, self.redactor.text(_ANSI.sub("", text)), live.STDERR), relay=False)
        self.kept.clear()


class _KfpRecords(logging.Filter):
    """kfp.local logs on the root logger itself: those records (not interlock's, which only
    propagate to it) are dropped unless the run is verbose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return live.verbose() or record.name != "root"


@contextlib.contextmanager
def kfp_output() -> Iterator[None]:
    """For one kfp-local run: kfp's own log and separators only when verbose, colour only on a terminal."""
    from kfp.local import logging_utils

    saved = {name: getattr(logging_utils, name) for name in ("local_logger_context", "print_horizontal_line", "color_text")}
    original_context, original_line, original_colour = saved.values()

    @contextlib.contextmanager
    def logger_context() -> Iterator[None]:
        if live.verbose():
            with original_context():
                yield
        else:
            yield

    def horizontal_line() -> None:
        if live.verbose():
            original_line()

    def color_text(text: str, color: Any) -> str:
        return original_colour(text, color) if _colour() else text

    logging_utils.local_logger_context = logger_context
    logging_utils.print_horizontal_line = horizontal_line
    logging_utils.color_text = color_text
    records = _KfpRecords()
    root = logging.getLogger()
    root.addFilter(records)
    try:
        yield
    finally:
        root.removeFilter(records)
        for name, value in saved.items():
            setattr(logging_utils, name, value)
