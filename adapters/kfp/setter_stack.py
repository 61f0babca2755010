"""kfp's task setters, built without reading every frame's source.

kfp's ``PipelineTask._ensure_container_spec_exists`` (run by ``set_env_variable``,
``set_cpu_request`` and the other container setters) calls ``inspect.stack()`` to put the
setter's name in an error message. ``inspect.stack()`` reads the source lines of every frame,
and the first call in a process scans every loaded module to find the frames' files (about
40 ms with kfp and interlock loaded; then a few lines read per frame and call). kfp uses the
name alone (``inspect.stack()[1][3]``): ``setters_without_source()`` hands kfp's module an
``inspect`` whose ``stack`` returns the same frames without source lines (context 0).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any


class _InspectWithoutSource:
    """``inspect`` as kfp's pipeline_task module sees it during a build."""

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)

    @staticmethod
    def stack(context: int = 1) -> list[inspect.FrameInfo]:  # noqa: ARG004 - kfp passes none; names only
        # inspect.stack's frames from the caller's, with no source. getframeinfo (what
        # getouterframes calls) still looks each frame's file up: a 1,000-step KFP compile
        # took 20% longer with it (benchmarks/kfp_compile.py).
        frames = []
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, None, None))
            frame = frame.f_back
        return frames


_PROXY = _InspectWithoutSource()


@contextlib.contextmanager
def setters_without_source() -> Iterator[None]:
    from kfp.dsl import pipeline_task

    if pipeline_task.__dict__.get("inspect") is not inspect:  # kfp changed, or already inside: as is
        yield
        return
    pipeline_task.inspect = _PROXY
    try:
        yield
    finally:
        pipeline_task.inspect = inspect
