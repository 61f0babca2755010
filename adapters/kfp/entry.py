"""What runs inside a KFP component: adapt KFP artifacts and parameters to interlock values,
call the runtime shim, and hand the outputs back to KFP.

Every generated component body is two lines that call ``run_node`` with the step's identity
(pipeline ref, node name, code fingerprint). The user's code is imported by module name
from the image (or, under kfp-local, from the parent's ``sys.path``); nothing is inlined.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from typing import Any

from interlock.core.errors import SerializationError, StepFailed
from interlock.core.failures import FailureKind
from interlock.core.loader import load_spec
from interlock.core.runstate import RunContext, RunEnv, state_dir_under
from interlock.core.runtime import execute_step
from interlock.core.spec import Binding, PipelineSpec, StepSpec
from interlock.core.types import TypeSpec
from interlock.core.values import from_jsonable, read_value, to_jsonable, write_value

from .component import declared_inputs
from .names import io_names, single_return
from .types import coerce_json, decode, encode, json_text

log = logging.getLogger("interlock.kfp")

def run_context(spec: PipelineSpec) -> RunContext:
    """The run inside a KFP task, from the environment contract.

    The run id must be stable across KFP retries of a task (FATAL marker, checkpoint key):
    kfp-local passes it; on a cluster it comes from the pod's ``pipeline/runid`` label (see
    policies.apply_task_settings). On a cluster the state root is a shared volume
    (state_pvc): markers and fragments are per run, under the run id known only here.
    """
    seen = RunEnv.read()
    run_id = seen.run_id
    if run_id is None:
        run_id = f"kfp-{uuid.uuid4().hex[:12]}"
        log.warning("no run id in the environment; FATAL markers will not stop KFP retries of this task")
    overrides: dict[str, Any] = {}
    if seen.state_dir is None and seen.state_root is None:
        overrides["state_dir"] = state_dir_under(Path(".interlock"), run_id)
    return RunContext.from_env(pipeline=spec.name, run_id=run_id, backend=seen.backend or "kfp", **overrides)


# -- inputs --------------------------------------------------------------------------------
def _follow(value: Any, fields: tuple[str, ...]) -> Any:
    for f in fields:
        value = value[f] if isinstance(value, dict) else getattr(value, f)
    return value


NULL_KEY = "interlock_null"  # an Optional artifact output that was None


def read_artifact(art: Any, t: TypeSpec) -> Any:
    """An input artifact (anything with ``.path``/``.metadata``) as an interlock value."""
    path = Path(art.path)
    if t.optional and dict(art.metadata or {}).get(NULL_KEY):
        return None
    if t.kind == "dataframe":
        if path.is_dir():
            return read_value(t, path)
        import pandas as pd

        try:
            return pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for a file that is not parquet
            raise SerializationError(f"input artifact {art.uri} is not a parquet file: {exc}") from exc
    if t.kind in ("dataset", "model"):
        return read_value(t, path)
    if t.kind == "metrics":
        from interlock.core.artifacts import Metrics

        if path.is_file():
            return Metrics(json.loads(path.read_text()))
        # A metrics artifact from a plain KFP component lives in its metadata only.
        return Metrics({k: v for k, v in dict(art.metadata or {}).items() if isinstance(v, int | float)})
    raise SerializationError(f"{t.describe()} is not an artifact type")


def to_value(raw: Any, binding: Binding | None, t: TypeSpec, declared: TypeSpec | None = None) -> Any:
    """A KFP input value (declared to KFP as ``declared``) as an interlock value of type ``t``."""
    if raw is None:
        return None
    fields = binding.field if binding is not None and binding.kind == "output" else ()
    if hasattr(raw, "path") and hasattr(raw, "uri"):
        value = read_artifact(raw, t if not fields else (declared or t))
        return _follow(value, fields) if fields else value
    raw = decode(raw, declared or t)
    if fields:
        raw = _follow(raw, fields)
    return from_jsonable(coerce_json(raw, t), t)


# -- outputs -------------------------------------------------------------------------------
def write_artifact(value: Any, t: TypeSpec, art: Any) -> None:
    path = Path(art.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    art.metadata["interlock_type"] = t.describe()
    if value is None:
        # KFP has no null artifact: mark it, and still write a file so kfp's cache sees one.
        art.metadata[NULL_KEY] = True
        path.write_text("null")
        return
    if t.kind == "dataframe":
        # A parquet file at .path, so plain KFP components can read it with pd.read_parquet.
        try:
            value.to_parquet(path, index=True)
        except Exception as exc:
            raise SerializationError(f"cannot write DataFrame as parquet: {exc}") from exc
        art.metadata.update(rows=len(value), columns=[str(c) for c in value.columns])
    elif t.kind in ("dataset", "model"):
        write_value(value, t, path)
        art.metadata.update({k: v for k, v in value.metadata.items() if _jsonable(v)})
    elif t.kind == "metrics":
        values = dict(value)
        for name, number in values.items():
            art.log_metric(name, float(number))
        # kfp only records metrics in metadata; the file must exist too, or kfp-local's
        # cache treats the artifact as missing and never hits.
        path.write_text(json.dumps(values, sort_keys=True))
    else:
        raise SerializationError(f"{t.describe()} is not an artifact type")


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


def to_parameter(value: Any, t: TypeSpec, where: str) -> Any:
    if json_text(t):
        return encode(to_jsonable(value, t), t)  # Optional: JSON text, "null" included
    if value is None:
        raise SerializationError(
            f"{where}: returned None; KFP output parameters cannot be None",
            hint="return a value, or use a dataclass field / sentinel for 'missing' on KFP",
        )
    return to_jsonable(value, t)


# -- the entry point -----------------------------------------------------------------------
def run_node(pipeline_ref: str, node: str, fingerprint: str, args: dict[str, Any]) -> Any:
    """Execute one node through the shim. Called by the generated component function."""
    spec = load_spec(pipeline_ref)
    step = spec.step_of(node)
    if step.fingerprint != fingerprint:
        raise StepFailed(
            node, FailureKind.FATAL,
            f"the code of step {step.name!r} in this image differs from the compiled pipeline "
            f"(fingerprint {step.fingerprint[:12]} != {fingerprint[:12]})",
            hint="rebuild the image from the same commit, then recompile", pipeline=spec.name,
        )
    inputs = node_inputs(spec, step, node, args)
    run = run_context(spec)
    try:
        result = execute_step(run, step, node, inputs)
    except StepFailed as exc:
        print(f"interlock: {exc}", file=sys.stderr, flush=True)
        raise
    names_in, names_out = io_names(step)
    params: list[Any] = []
    for port in step.outputs:
        value = result.outputs[port.name]
        kname = names_out[port.name]
        if port.type.is_artifact:
            write_artifact(value, port.type, args[kname])
        else:
            params.append(to_parameter(value, port.type, f"step {step.name!r}, output {port.name!r}"))
    if not params:
        return None
    return params[0] if single_return(step) else tuple(params)


def node_inputs(spec: PipelineSpec, step: StepSpec, node: str, args: dict[str, Any]) -> dict[str, Any]:
    bindings = spec.node(node).bindings
    names_in, _ = io_names(step)
    declared = declared_inputs(spec, node)
    inputs: dict[str, Any] = {}
    for port in step.inputs:
        raw = args.get(names_in[port.name])
        if port.name not in declared or (raw is None and port.name not in bindings):
            inputs[port.name] = from_jsonable(port.default, port.type) if port.has_default else None
            continue
        inputs[port.name] = to_value(raw, bindings.get(port.name), port.type, declared[port.name])
    return inputs


__all__ = ["load_spec", "run_node", "read_artifact", "write_artifact"]
