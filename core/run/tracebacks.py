"""A step's traceback as its author wants to read it: their frames, not interlock's.

A failure record keeps the traceback of the exception that escaped the step, with the
frames of interlock itself and of the orchestrator that called it (flytekit, kfp) left out:
what remains starts at the user's step function and ends where their code raised. Chained
exceptions (``raise ... from``) keep their sections. When no frame is the user's (interlock
itself raised), nothing is trimmed: then interlock's frames are the ones that matter.
"""

from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path

__all__ = ["MAX_TRACEBACK_CHARS", "tail", "user_traceback"]

MAX_TRACEBACK_CHARS = 20_000
# Packages whose frames sit between the user's code and the orchestrator; only ever looked
# up in sys.modules (never imported here).
_FRAMEWORKS = ("interlock", "flytekit", "kfp", "runpy", "contextlib", "concurrent", "threading")


def _framework_dirs() -> tuple[str, ...]:
    core = Path(__file__).resolve().parents[1]  # this file is core/run/tracebacks.py
    dirs = {str(core), str(core.parent / "adapters"), str(core.parent / "plugins")}
    for name in _FRAMEWORKS:
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None) if mod is not None else None
        if path:
            p = Path(path).resolve()
            dirs.add(str(p.parent) if p.name == "__init__.py" else str(p))
    return tuple(dirs)


def _is_framework(filename: str, dirs: tuple[str, ...]) -> bool:
    try:
        f = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return any(f == d or f.startswith(d + "/") for d in dirs)


def _trim(te: traceback.TracebackException, dirs: tuple[str, ...], seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    user = [f for f in te.stack if not _is_framework(f.filename, dirs)]
    if user:
        te.stack = traceback.StackSummary.from_list(user)
    for nxt in (te.__cause__, te.__context__):
        if nxt is not None:
            _trim(nxt, dirs, seen)
    for member in getattr(te, "exceptions", None) or ():  # exception groups
        _trim(member, dirs, seen)


def user_traceback(exc: BaseException, *, full: bool = False, limit: int = MAX_TRACEBACK_CHARS) -> str:
    """``exc``'s traceback, interlock's and the orchestrator's frames trimmed unless ``full``."""
    try:
        te = traceback.TracebackException.from_exception(exc, capture_locals=False)
        if not full:
            _trim(te, _framework_dirs(), set())
        text = "".join(te.format())
    except Exception:  # formatting must never break failure handling
        return ""
    if len(text) > limit:  # keep the end: that is where the error is
        text = f"... [{len(text) - limit} chars cut]\n" + text[-limit:]
    return text


def tail(text: str, lines: int = 8) -> str:
    """The last ``lines`` lines of a traceback: the raising frame and the error, after the
    user's own last frame (their file and line) when a library raised below it."""
    rows = text.rstrip("\n").splitlines()
    frames = [i for i, row in enumerate(rows) if _FRAME.match(row)]
    # From a frame's first line on, not from the middle of one.
    start = next((i for i in frames if i >= len(rows) - lines), frames[-1] if frames else max(0, len(rows) - lines))
    last = rows[start:]
    own = [i for i in frames if not _is_library(_FRAME.match(rows[i]).group(1))]  # type: ignore[union-attr]
    if not own or own[-1] >= start:
        return "\n".join(last)
    at = own[-1]
    end = next((i for i in frames if i > at), at + 1)
    return "\n".join([*rows[at:min(end, start)], "  ...", *last])


_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+')


def _library_dirs() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple({str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths})


def _is_library(filename: str) -> bool:
    """A frame of the standard library or an installed package (not the user's own file)."""
    if filename.startswith("<"):  # <frozen runpy>, <string>
        return True
    try:
        f = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return any(f == d or f.startswith(d + "/") for d in _library_dirs())
