"""Run kfp's task setters from a shallow stack while a pipeline is built.

kfp's container setters (``set_cpu_request``, ``set_memory_limit``, ``set_env_variable``...)
call ``inspect.stack()`` only to name themselves in an error message; that reads every frame
of the calling stack, and for each frame Python walks the code's positions up to the current
instruction. Under interlock's compiler the stack holds the pipeline builder's long
functions (``emit_nodes``, ``_task``): six setters per task cost about 0.45 ms there against
0.25 ms in a hand-written ``@dsl.pipeline`` body, a third of the compile.

``with shallow_setters():`` (around a pipeline build) starts one helper thread;
``call(fn, ...)`` runs ``fn`` on it and waits, so the setters see the helper's few frames.
The builder waits for each call, so kfp's objects are never touched by two threads at once,
and the result is the same IR as calling ``fn`` in place (outside the block, ``call`` does
exactly that). An exception raised on the helper is re-raised in the caller.
"""

from __future__ import annotations

import _thread
import queue
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")


class _Helper:
    """One thread whose stack is a single frame (``_thread``: ``threading``'s bootstrap would
    add three), running one call at a time for a waiting caller."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None] = (
            queue.SimpleQueue())
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._result: tuple[bool, Any] = (True, None)
        _thread.start_new_thread(self._serve, ())

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, kwargs = job
            try:
                self._result = (True, fn(*args, **kwargs))
            except BaseException as exc:  # handed to the waiting caller, which raises it
                self._result = (False, exc)
            self._done.release()

    def call(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        self._jobs.put((fn, args, kwargs))
        self._done.acquire()
        ok, value = self._result
        self._result = (True, None)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def stop(self) -> None:
        self._jobs.put(None)


# The helper of the open block; the helper's own thread sees None (a thread starts with an
# empty context), so a call made there runs in place instead of waiting on itself.
_HELPER: ContextVar[_Helper | None] = ContextVar("interlock_kfp_shallow_helper", default=None)


@contextmanager
def shallow_setters() -> Iterator[None]:
    if _HELPER.get() is not None:  # already inside a block: use its helper
        yield
        return
    helper = _Helper()
    token = _HELPER.set(helper)
    try:
        yield
    finally:
        _HELPER.reset(token)
        helper.stop()


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    helper = _HELPER.get()
    if helper is None:
        return fn(*args, **kwargs)
    return helper.call(fn, args, kwargs)
