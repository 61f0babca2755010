"""Resuming a run: the parameters it ran with, so that ``--resume RUN_ID`` is the same run.

A resumed run (``il.run(..., resume=RUN_ID)``, or a reused run id) takes every parameter the
caller does not give again from the run's previous attempt, as Flyte's recover and KFP's
retry reuse an execution's inputs: a training step that continues from its checkpoint must
not silently switch to the defaults. Parameter values that look secret (the receipt masks
them) are never written to disk; a resume that needs one asks for it again.
"""

from __future__ import annotations

import json
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError, RecordError, RunIdError
from interlock.core.model.codecs import revive, to_jsonable
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.receipt import redact
from interlock.core.record.run_data import SPEC_FILE
from interlock.core.run.files import write_json_atomic
from interlock.core.run.state import RunState

WITHHELD = "withheld"


def record_params(spec: PipelineSpec, state: RunState, resolved: dict[str, Any]) -> None:
    """Write the run's parameters (JSON form) for a later resume; secret-looking ones withheld."""
    values: dict[str, Any] = {}
    withheld: list[str] = []
    for p in spec.params:
        if p.name not in resolved:
            continue
        try:
            value = to_jsonable(revive(resolved[p.name], p.type), p.type)  # a dataclass may come as its JSON object
            if redact({p.name: value})[p.name] != value:
                raise ValueError("secret-looking")
            values[p.name] = value
        except (TypeError, ValueError, AttributeError):  # a secret, or not JSON-able (a DataFrame)
            withheld.append(p.name)
    write_json_atomic(state.params_path, {"run_id": state.run_id, "params": values, WITHHELD: withheld}, indent=1)


def recorded_pipeline(state: RunState) -> str | None:
    """The name of the pipeline the run in ``state`` ran (its recorded spec, else its
    receipt); None when nothing says (a run killed before it recorded anything)."""
    for path in (state.state_dir / SPEC_FILE, state.receipt_path):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        key = "name" if path.name == SPEC_FILE else "pipeline"
        if isinstance(data, dict) and isinstance(data.get(key), str):
            return str(data[key])
    return None


def check_same_pipeline(spec: PipelineSpec, state: RunState, workdir: Any) -> None:
    """A resume (or a reused run id) continues the same pipeline: another pipeline's run is
    refused, so that its parameters, steps and receipt are never taken for this one's."""
    ran = recorded_pipeline(state)
    if ran is not None and ran != spec.name:
        raise RunIdError(
            f"run {state.run_id} in {workdir} is a run of pipeline {ran!r}, not {spec.name!r}: "
            "a resume continues the same pipeline",
            hint=f"leave --run-id out (or pick another) for a new run of {spec.name}; resume {state.run_id} "
            f"with pipeline {ran}",
        )


def with_recorded_params(spec: PipelineSpec, state: RunState, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` completed with the values the run's previous attempt used."""
    try:
        recorded = state.read_params()
    except RecordError:
        if all(p.name in params for p in spec.params):
            return params  # nothing to take from the unreadable record
        raise
    if recorded is None:
        return params
    values, withheld = recorded
    out = dict(params)
    for p in spec.params:
        if p.name in out:
            continue
        if p.name in values:
            out[p.name] = revive(values[p.name], p.type)
        elif p.name in withheld:
            raise PipelineDefinitionError(
                f"resuming run {state.run_id}: the value of this parameter was not recorded (it looks secret or is "
                "not JSON), pass it again", pipeline=spec.name, port=p.name,
                hint=f"-p {p.name}=... on the command line, or il.run(..., {p.name}=...)",
            )
    return out
