"""What kfp-local shows while it runs: the steps' own lines, not kfp's.

kfp.local echoes every line a task subprocess writes (the executor's INFO log, the whole
executor input as JSON, the step's prints) and logs its own progress on the root logger
with colour codes, even into a pipe. The task's shim relays the step's lines tagged
(core/live.py, ``INTERLOCK_LIVE``): those are published to the run's console; the rest is
kfp's, shown only when the run is verbose, without colour codes unless on a terminal.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from interlock.core import live
from interlock.core.redact import Redactor

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _colour() -> bool:
    isatty = getattr(live.real(sys.stdout), "isatty", None)
    return bool(isatty and isatty())


def echo(redactor: Redactor, *values: Any, **kw: Any) -> None:
    """Stands in for the ``print`` kfp.local echoes a task's output lines with."""
    text = "".join(str(v) for v in values)  # kfp passes one line at a time
    line = live.decode(text.rstrip("\n"))
    if line is not None:
        live.publish(replace(line, text=redactor.text(line.text)), relay=False)
    elif live.verbose():
        print(redactor.text(text if _colour() else _ANSI.sub("", text)), **kw)


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
