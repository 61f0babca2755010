"""Failure handlers (``il.on_failure``: a finally step that runs only when its scope failed, Flyte's
``on_failure=``) and finally steps that take no ``il.RunStatus`` (a KFP exit task that is a plain
component)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import interlock as il
from conformance.finally_pipelines import maybe_fail, prepare
from interlock.core.dsl.finally_ import finally_, on_failure
from interlock.core.model.finally_blocks import RunStatus


@il.step
def handle(status: RunStatus, label: str, out: str) -> None:
    seen = {"label": label, "status": status.status, "failed_steps": status.failed_steps}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{label}.json").write_text(json.dumps(seen))


@il.step
def tidy_up(label: str, out: str) -> None:
    # No il.RunStatus: a plain cleanup.
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{label}.json").write_text(json.dumps({"label": label}))


@il.pipeline(name="conf-handler-run")
def handler_run(x: int = 1, fail: bool = False, out: str = os.devnull):
    """A handler for the whole pipeline: runs only if the run failed."""
    on_failure(handle.named("on-fail"), label="run", out=out)
    y = prepare(x=x)
    return maybe_fail(x=y, fail=fail)


@il.pipeline(name="conf-handler-block", failure_policy="continue")
def handler_block(x: int = 1, fail: bool = False, out: str = os.devnull):
    """A handler scoped to one block, beside a block whose finally step takes no status."""
    with on_failure(handle.named("block-handler"), label="block", out=out):
        maybe_fail(x=x, fail=fail)
    with finally_(tidy_up.named("tidy"), label="tidy", out=out):
        prepare(x=x)


@il.pipeline(name="conf-plain-finally")
def plain_finally(x: int = 1, fail: bool = False, out: str = os.devnull):
    """A whole-pipeline finally step with no il.RunStatus input."""
    finally_(tidy_up.named("cleanup"), label="cleanup", out=out)
    return maybe_fail(x=x, fail=fail)


@il.pipeline(name="conf-handled-part")
def handled_part(x: int = 1, fail: bool = False, out: str = os.devnull):
    """A sub-pipeline with its own handler: scoped to each call (Flyte: the sub-workflow's on_failure)."""
    on_failure(handle.named("part-handler"), label="part", out=out)
    return maybe_fail(x=x, fail=fail)


@il.pipeline(name="conf-handler-call")
def handler_call(x: int = 1, fail: bool = False, out: str = os.devnull):
    y = handled_part(x=x, fail=fail, out=out)
    return prepare(x=y)
