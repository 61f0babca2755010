"""In-process orchestration of a PipelineSpec through the runtime shim."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from interlock.core.backends import Capabilities, RunOptions, RunResult
from interlock.core.bindings import gate_open, node_inputs, resolve
from interlock.core.cache import LocalCache, cache_key
from interlock.core.errors import StepFailed
from interlock.core.receipt import assemble_receipt
from interlock.core.runstate import RunContext, Seen, settle, state_dir_of
from interlock.core.runtime import execute_step, record_cache_hit
from interlock.core.spec import PipelineSpec
from interlock.core.status import Status
from interlock.core.values import read_value, write_value

from .fanout import run_map

NATIVE = "native"


class LocalBackend:
    name = "local"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name,
            description="in-process runner; the reference implementation of the runtime contract",
            features={
                "run": NATIVE,
                "gpu": "emulated: requested in the spec; the step runs on whatever devices this host has",
                "accelerator": "emulated: recorded in the receipt, not scheduled",
                "shared_memory": "emulated: ignored (no container)",
                "node_selector": "emulated: ignored (no scheduler)",
                "tolerations": "emulated: ignored (no scheduler)",
                "interruptible": "emulated: SIGTERM to the process is handled as a preemption",
                "timeout": "native (SIGALRM in the shim)",
                "retry.transient": "native (shim)",
                "retry.contention_backoff": "native (shim, exponential backoff)",
                "retry.preempted": "native (shim, outside the retry budget)",
                "retry.fatal_stop": "native (shim)",
                "cache": "native (core cache keys, directory store)",
                "checkpoint": "native (local directory or S3 store)",
                "gates": NATIVE,
                "map": "native (threads, at most `concurrency` items at once; each item through the shim)",
                "map.tolerate": "native (shim: failed items are None, their indices in RunResult.maps)",
                "fan_in": NATIVE,
                "secrets": "emulated: read from the environment variable each Secret names",
                "labels": "emulated: recorded in the receipt",
                "distributed": "unsupported",
                "schedule": "unsupported",
            },
        )

    def compile(self, spec: PipelineSpec, out: Path, **options: Any) -> list[Path]:
        out = Path(out)
        path = out if out.suffix == ".json" else out / f"{spec.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(spec.dumps(indent=2))
        return [path]

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        started = time.time()
        run = RunContext(spec.name, options.run_id, self.name, state_dir_of(options.run_dir), sleeper=options.sleeper)
        cache = LocalCache(options.cache_dir)
        typed_params = {
            p.name: resolve_param(params[p.name], p.type) for p in spec.params if p.name in params
        }
        outputs: dict[str, dict[str, Any]] = {}
        seen: dict[str, Seen] = {}
        maps: dict[str, Any] = {}
        failed = False
        for node in spec.nodes:
            step = spec.step_of(node)
            if failed:
                break  # what follows is NOT_RUN (or SKIPPED behind a closed gate): settle() says which
            if not gate_open(spec, node.gate, outputs):
                options.emit(node.name, Status.SKIPPED, "gate closed")
                continue
            inputs = node_inputs(spec, node.name, typed_params, outputs)
            if node.map is not None:  # il.map: one shim run per item (fanout.py)
                mapped = run_map(spec, node, inputs, run, cache, options)
                seen[node.name], maps[node.name] = mapped.seen, mapped.report
                failed = mapped.outputs is None
                if mapped.outputs is not None:
                    outputs[node.name] = mapped.outputs
                options.emit(node.name, mapped.seen.status, f"{mapped.report.items if mapped.report else 0} item(s)")
                continue
            use_cache = options.cache and step.cache is not None and step.cache.enabled
            key = cache_key(step, inputs) if use_cache else None
            hit = cache.get(step, key) if key else None
            if hit is not None and key:
                outputs[node.name] = hit
                record_cache_hit(run, step, node.name, cache.provenance(step, key))
                seen[node.name] = Seen(Status.CACHED)
                options.emit(node.name, Status.CACHED, key[:12] if key else "")
                continue
            options.emit(node.name, "started", "")
            try:
                fn = options.functions.get(step.name)
                result = execute_step(run, step, node.name, inputs, fn)
            except StepFailed as exc:
                failed = True
                seen[node.name] = Seen(Status.FAILED, error=exc)
                options.emit(node.name, Status.FAILED, f"{exc.kind}: {exc.reason}")
                continue
            # Values cross the boundary as files, exactly as they would between containers.
            values_dir = options.run_dir / "values" / node.name
            for port in step.outputs:
                write_value(result.outputs[port.name], port.type, values_dir / port.name)
            outputs[node.name] = {p.name: read_value(p.type, values_dir / p.name) for p in step.outputs}
            if key:
                provenance = {"run_id": options.run_id, "snapshots": result.snapshots, "facts": result.facts}
                cache.put(step, key, outputs[node.name], provenance)
            seen[node.name] = Seen(Status.SUCCEEDED)
            duration = result.ended - result.started
            options.emit(node.name, Status.SUCCEEDED, f"{duration:.2f}s, {len(result.attempts)} attempt(s)")

        gates = {g.id: bool(resolve(g.condition, typed_params, outputs)) for g in spec.gates
                 if g.condition.kind != "output" or g.condition.node in outputs}
        outcome = settle(spec, run.state, seen, gates=gates)
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=self.name, state_dir=run.state_dir, params=params,
            status=outcome.status, statuses=outcome.statuses, started=started,
        )
        if outcome.error is not None:
            outcome.error.receipt_path = str(receipt)
        final = {} if outcome.error else {k: resolve(b, typed_params, outputs) for k, b in spec.outputs}
        return RunResult(spec.name, options.run_id, self.name, outcome.status, final, outcome.steps, receipt,
                         outcome.error, maps=maps)


def resolve_param(value: Any, t: Any) -> Any:
    from interlock.core.values import revive

    return revive(value, t)
