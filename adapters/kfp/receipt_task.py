"""The run's receipt on a cluster: a KFP exit handler that assembles the shim's fragments.

Each task's shim writes its receipt fragment into the run's state directory. On a cluster
that directory is on the state volume (``state_pvc``), so one more task, run by
``dsl.ExitHandler`` whether the pipeline succeeded or failed, can merge the fragments into
``receipt.json`` next to them. Without a state volume the fragments die with their pods
and no receipt task is compiled (kfp-local assembles the receipt in-process instead).
"""

from __future__ import annotations

import time
from typing import Any

from interlock.core.model.pipeline_spec import PipelineSpec

from .component import DEFAULT_IMAGE, _function_from_source
from .policies import KfpOptions, apply_receipt_settings
from .types import kfp_type

FUNCTION_NAME = "interlock_receipt"


def receipt_source(spec: PipelineSpec) -> str:
    params = [f"{p.name}: {kfp_type(p.type).parameter}" for p in spec.params]
    args = ", ".join(f"{p.name!r}: {p.name}" for p in spec.params)
    signature = ", ".join(["status: PipelineTaskFinalStatus", *params])
    return (
        f"def {FUNCTION_NAME}({signature}) -> str:\n"
        f"    from interlock.adapters.kfp.receipt_task import finish_run\n"
        f"    return finish_run({spec.ref!r}, {{{args}}}, status.state)\n"
    )


def make_receipt_task(spec: PipelineSpec, values: dict[str, Any], opts: KfpOptions) -> Any:
    """Create the exit task (inside the pipeline body, before the ExitHandler block)."""
    from kfp import dsl

    source = receipt_source(spec)
    fn = _function_from_source(source, FUNCTION_NAME, f"<interlock-kfp {spec.name}/receipt>")
    comp = dsl.component(fn, base_image=opts.image or DEFAULT_IMAGE, install_kfp_package=False)
    task = comp(**{p.name: values[p.name] for p in spec.params})
    apply_receipt_settings(task, spec, opts)
    return task


def finish_run(pipeline_ref: str, params: dict[str, Any], state: str | None = None) -> str:
    """In the exit task: merge the fragments of this run into receipt.json; returns its path.

    The exit task sees only the fragments (``seen=None``): a node without one in this run
    (a KFP cache hit, a closed gate, or never reached) is recorded as not-run.
    """
    from interlock.core.record.outcomes import settle
    from interlock.core.record.receipt import assemble_receipt

    from .entry import load_spec, run_context
    from .types import decode

    spec = load_spec(pipeline_ref)
    run = run_context(spec)
    kfp_failed = (state or "").upper() in ("FAILED", "ERROR")
    outcome = settle(spec, run.state, None, failed=f"KFP reported the run {state}" if kfp_failed else None)
    started = [f.started for f in outcome.fragments.values() if f.started]
    typed = {p.name: decode(params.get(p.name), p.type) for p in spec.params}
    path = assemble_receipt(
        spec, run_id=run.run_id, backend=run.backend, state_dir=run.state_dir, params=typed,
        status=outcome.status, statuses=outcome.statuses,
        started=min(started) if started else time.time(), extra={"kfp": {"final_state": state}},
    )
    print(f"interlock: receipt {path}", flush=True)
    return str(path)
