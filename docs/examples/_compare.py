"""Run one pipeline on local, flyte-local and kfp-local and check that they agree exactly."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import interlock as il

BACKENDS = ("local", "flyte-local", "kfp-local")


def outcome(pipeline: Any, backend: str, workdir: Path, **params: Any) -> tuple[str, dict, dict]:
    r = il.run(pipeline, backend=backend, workdir=workdir, raise_on_failure=False, **params)
    return (str(r.status), {k: (type(v).__name__, v) for k, v in r.outputs.items()},
            {k: str(s.status) for k, s in sorted(r.steps.items())})


def same_everywhere(pipeline: Any, backends: tuple[str, ...] = BACKENDS, **params: Any) -> tuple[str, dict, dict]:
    """The outcome (status, typed outputs, step statuses), after checking every backend gives it."""
    results = {b: outcome(pipeline, b, Path(tempfile.mkdtemp()) / b, **params) for b in backends}
    first = results[backends[0]]
    for b, got in results.items():
        if got != first:
            raise AssertionError(f"{pipeline.name}: {b} gave {got}, {backends[0]} gave {first}")
    return first
