"""The task entry: what each container of a compiled Workflow runs.

    python -m interlock.adapters.argo.entry run --pipeline REF --node NODE --fingerprint FP \
        --out /tmp/interlock/out --in json threshold '{{inputs.parameters.threshold}}' \
        --in artifact raw /tmp/interlock/in/raw

reads each input from the text Argo substituted or the artifact directory it unpacked (an
input named ``port@field.path`` follows a dataclass field, ``port[i]`` is item i of a list
written in the body, kind ``gather`` is a map's aggregated output), runs the step through the
runtime shim, writes each output where the template's ``outputs`` read it, and exits with the
code of the failure kind (``exit_codes``) so that ``retryStrategy.expression`` decides retries.
The pipeline is rebuilt from its reference in the image, as Flyte's resolver does; the run is
``INTERLOCK_RUN_ID`` (the workflow's name) under the state root the manifest mounts.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from interlock.core.base.errors import StepFailed, StepStopped
from interlock.core.base.status import FailureKind
from interlock.core.model.codecs import from_jsonable
from interlock.core.model.fanout import item_node
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.values import write_value
from interlock.core.run.env import RunEnv, state_dir_under
from interlock.core.run.state import RunContext

from .exit_codes import exit_code
from .joins import MISSING, settle_joins
from .values import gathered, jsonable_from_text, read_artifact, write_output

BACKEND = "argo"
_PORT = re.compile(r"^(?P<port>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<index>\d+)\])?(?:@(?P<field>[\w.]+))?$")


def run_context(pipeline: str) -> RunContext:
    seen = RunEnv.read()
    run_id = seen.run_id or f"argo-{int(time.time())}"
    overrides: dict[str, Any] = {}
    if seen.state_dir is None and seen.state_root is None:  # no volume: the pod's own folder
        overrides["state_dir"] = state_dir_under(Path(".interlock"), run_id)
    return RunContext.from_env(pipeline=pipeline, run_id=run_id, backend=seen.backend or BACKEND, **overrides)


def _follow(data: Any, path: str | None) -> Any:
    for name in (path.split(".") if path else ()):
        data = None if data is None else data[name]
    return data


def node_inputs(spec: PipelineSpec, node: str, given: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The step's inputs from what the manifest passed (kind, port spec, text or path); a port
    it did not pass takes its default."""
    n = spec.node(node)
    step = spec.step_of(n)
    types = {p.name: p.type for p in step.inputs}
    bindings = n.bindings
    decl = _declared(spec, n)
    items: dict[str, dict[int, Any]] = {}
    inputs: dict[str, Any] = {}
    for kind, spec_text, value in given:
        m = _PORT.match(spec_text)
        if m is None or m["port"] not in types:
            raise SystemExit(f"interlock: step {node!r} has no input {spec_text!r}")
        port, index, field = m["port"], m["index"], m["field"]
        t = types[port]
        if index is not None:
            t = t.args[0]
        src = decl.get((port, int(index) if index is not None else None), t) if field else t
        kind, may_miss = kind.rstrip("?"), kind.endswith("?")
        if may_miss and value == MISSING:  # its upstream made nothing (a join rule ran it)
            v = None
        elif kind == "kept":  # a finally step's input from its scope: the run state, None if never made
            v = _kept(spec, value, t, field)
        elif kind == "artifact":
            v = read_artifact(t, value)
        elif kind == "gather":
            v = gathered(value, t)
        else:
            v = from_jsonable(_follow(jsonable_from_text(value, src), field), t)
        if index is None:
            inputs[port] = v
        else:
            items.setdefault(port, {})[int(index)] = v
    for port, got in items.items():
        inputs[port] = [got[i] for i in sorted(got)]
    for p in step.inputs:
        if p.name not in inputs and p.name not in bindings:
            inputs[p.name] = from_jsonable(p.default, p.type) if p.has_default else None
    return inputs


def _kept(spec: PipelineSpec, where: str, t: Any, field: str | None) -> Any:
    from .gates import FOLDER

    producer, _, port = where.partition("/")
    path = run_context(spec.name).state_dir / FOLDER / producer / port
    if not path.exists():
        return None
    src = next(p.type for p in spec.step_of(producer).outputs if p.name == port)
    return from_jsonable(_follow(jsonable_from_text(path.read_text(), src), field), t)


def _declared(spec: PipelineSpec, n: Any) -> dict[tuple[str, int | None], Any]:
    """The type of what feeds a port whose binding picks a field: the producer's whole output."""
    from interlock.core.model.spec import BindingKind

    out: dict[tuple[str, int | None], Any] = {}
    for port, b in n.inputs:
        bs = [(None, b)] if b.kind is not BindingKind.LIST else list(enumerate(b.items))
        for i, one in bs:
            if one.kind is BindingKind.OUTPUT and one.field:
                producer = spec.step_of(one.node)
                out[(port, i)] = next(p.type for p in producer.outputs if p.name == one.port)
    return out


def run(spec: PipelineSpec, node: str, fingerprint: str, given: list[tuple[str, str, str]], out: Path,
        item: int | None = None, status: Any = None, keep: tuple[str, ...] = (), volume_outputs: bool = False,
        tolerant: bool = False) -> int:
    """Run one node (item ``item`` of a map) through the shim; the process's exit code."""
    from interlock.core.run.runtime import execute_step

    n = spec.node(node)
    step = spec.step_of(n)
    run_ctx = run_context(spec.name)
    if step.fingerprint != fingerprint:
        print(f"interlock: the code of step {step.name!r} in this image differs from the compiled workflow "
              f"(fingerprint {step.fingerprint[:12]} != {fingerprint[:12]}); rebuild the image and recompile",
              file=sys.stderr, flush=True)
        return exit_code(FailureKind.FATAL, False)

    def prepare() -> dict[str, Any]:
        inputs = node_inputs(spec, node, given)
        if status is not None:
            from interlock.core.model.finally_blocks import finally_inputs

            inputs = finally_inputs(spec, n, inputs, status)
        return inputs

    def write(outputs: dict[str, Any]) -> None:
        for p in step.outputs:
            if volume_outputs and p.type.is_artifact:  # a map item's: on the volume, its path for the readers
                held = run_ctx.state_dir / "argo-values" / name / p.name
                write_value(outputs[p.name], p.type, held)
                out.mkdir(parents=True, exist_ok=True)
                (out / p.name).write_text(str(held))
                continue
            write_output(outputs[p.name], p.type, out, p.name)
            if p.name in keep and item is None:  # a gate reads it (gates.py)
                from .gates import keep as keep_value

                keep_value(run_ctx.state_dir, node, p.name, (out / p.name).read_text())

    name = item_node(node, item) if item is not None else node
    if tolerant and item is not None:  # an item of a tolerant map: its envelope, never a failure
        from .tolerance import run_item

        return run_item(run_ctx, step, name, item, prepare, out)
    try:
        execute_step(run_ctx, step, name, prepare, write=write)
    except StepStopped as exc:
        print(f"interlock: {exc.headline()}", file=sys.stderr, flush=True)
        return exc.exit_code
    except StepFailed as exc:
        print(f"interlock: {exc.headline()}", file=sys.stderr, flush=True)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr, flush=True)
        return exit_code(exc.kind, exc.backend_should_retry)
    return 0


def settled_status(spec: PipelineSpec, node: str | None, argo_status: str | None,
                   params: dict[str, str] | None = None) -> Any:
    """The RunStatus a finally step receives: settled from the run's fragments (the same rule as
    every backend); Argo's own status (``{{workflow.status}}``) adds a failure they do not show.
    None: the finally step of a block the run never entered (Argo runs a task's exit hook
    whatever became of the task; like Python's ``finally``, such a block runs none)."""
    from interlock.core.model.finally_blocks import block_of, block_spec, reached
    from interlock.core.record.outcomes import run_status, settle

    block = block_of(spec, node) if node else None
    scope = block_spec(spec, block) if block is not None else spec
    from .gates import decided, sized

    state = run_context(spec.name).state
    sized(spec, state, params or {})
    failed = (argo_status or "").lower() in ("failed", "error")
    outcome = settle(scope, state, None, gates=decided(spec, state.state_dir, params or {}),
                     failed=f"Argo reported the workflow {argo_status}" if failed else None)
    settle_joins(scope, outcome)
    if block is not None and not reached(spec, block, outcome.steps):
        return None
    return run_status(outcome)


def finish(spec: PipelineSpec, params: dict[str, str], argo_status: str | None) -> Path:
    """The exit handler's receipt: the run's fragments merged into receipt.json beside them."""
    from interlock.core.record.outcomes import Seen, settle, with_finally
    from interlock.core.record.receipt import assemble_receipt

    from .gates import decided, sized
    from .values import from_text

    run_ctx = run_context(spec.name)
    sized(spec, run_ctx.state, params)
    failed = (argo_status or "").lower() in ("failed", "error")
    gates = decided(spec, run_ctx.state_dir, params)
    outcome = settle(spec, run_ctx.state, None, gates=gates,
                     failed=f"Argo reported the workflow {argo_status}" if failed else None)
    settle_joins(spec, outcome)
    finals = run_ctx.state.fragments(n.name for n in spec.finally_nodes())
    outcome = with_finally(spec, run_ctx.state, outcome, {k: Seen(f.status) for k, f in finals.items()}, gates)
    started = [f.started for f in outcome.fragments.values() if f.started]
    typed = {p.name: from_text(params[p.name], p.type) for p in spec.params if p.name in params}
    path = assemble_receipt(
        spec, run_id=run_ctx.run_id, backend=run_ctx.backend, state_dir=run_ctx.state_dir, params=typed,
        status=outcome.status, statuses=outcome.statuses, started=min(started) if started else time.time(),
        extra={"argo": {"workflow_status": argo_status}},
    )
    print(f"interlock: receipt {path}", flush=True)
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m interlock.adapters.argo.entry")
    p.add_argument("mode", choices=("run", "finally", "exit", "tolerance", "stage", "publish", "settle"))
    p.add_argument("--pipeline", required=True, help="module:attribute of the pipeline")
    p.add_argument("--node")
    p.add_argument("--fingerprint")
    p.add_argument("--out", default="/tmp/interlock/out")
    p.add_argument("--in", dest="given", nargs=3, action="append", default=[], metavar=("KIND", "PORT", "VALUE"))
    p.add_argument("--item", type=int, help="the map item's index")
    p.add_argument("--status", help="Argo's status of the workflow ({{workflow.status}})")
    p.add_argument("--param", nargs=2, action="append", default=[], metavar=("NAME", "TEXT"))
    p.add_argument("--keep", action="append", default=[], help="an output a gate reads: kept in the run state")
    p.add_argument("--volume-outputs", action="store_true", help="a map item's artifact outputs stay on the volume")
    p.add_argument("--tolerant", action="store_true", help="an item of a tolerant map: report in an envelope")
    p.add_argument("--envelopes", help="a tolerant map's items' envelopes, as Argo aggregates them")
    return p


def main(argv: list[str] | None = None) -> int:
    from interlock.core.model.finally_blocks import handler_runs, is_handler
    from interlock.core.model.refs import load_spec

    a = _parser().parse_args(argv)
    spec = load_spec(a.pipeline)
    given = [tuple(g) for g in a.given]
    if a.mode == "run":
        return run(spec, a.node, a.fingerprint, given, Path(a.out), a.item, keep=tuple(a.keep),
                   volume_outputs=a.volume_outputs, tolerant=a.tolerant)
    if a.mode == "tolerance":
        from .tolerance import check

        return check(spec, a.node, a.envelopes, Path(a.out))
    if a.mode in ("stage", "publish", "settle"):  # around a distributed step's TrainJob (handoff.py)
        from .handoff import publish, settle, stage

        if a.mode == "stage":
            return stage(run_context(spec.name).state_dir, a.node, given)
        if a.mode == "settle":
            return settle(spec, a.node)
        return publish(spec, a.node, Path(a.out), tuple(a.keep))
    code = 0
    if a.node:  # a finally step: the status of its scope first
        status = settled_status(spec, a.node, a.status, dict(a.param))
        if status is None:
            print(f"interlock: finally step {a.node!r} not run: the run never entered its block", flush=True)
        elif is_handler(spec, a.node) and not handler_runs(status):
            print(f"interlock: failure handler {a.node!r} not run: the run {status.status}", flush=True)
        else:
            print(f"interlock: finally step {a.node!r} sees the run {status.status}", flush=True)
            code = run(spec, a.node, a.fingerprint, given, Path(a.out), status=status, keep=tuple(a.keep))
    if a.mode == "exit":
        finish(spec, dict(a.param), a.status)
    return code


if __name__ == "__main__":
    sys.exit(main())
