"""What an Airflow task of an interlock DAG does in the worker: decide, run one node, record.

Airflow schedules; the run state on disk is the truth. Each task first decides from the run
state whether its node may start (the failure policy, the failures upstream, its il.when
gates: the same rule, in plan order, as the local backend's), then runs the node through the
runtime shim (cache, resume, checkpoints, retries, stop markers, the fragment), writes its
outputs as interlock's codecs into the run's value folders, and leaves one record of what it
did (``Records``). The watching process (``local.py``) and the finally tasks settle the run
from those records, never from Airflow's task states. XCom carries only references (the
value folder's path): its JSON refuses ``inf``, which a champion gate produces.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from interlock.core.backend.failure_scope import Downstream
from interlock.core.backend.plan import Plan, lower
from interlock.core.base.errors import SerializationError, StepFailed, StepSkipped, StepStopped
from interlock.core.base.status import FailureKind, Status
from interlock.core.model.codecs import revive
from interlock.core.model.failure_policy import CONTINUE
from interlock.core.model.fanout import item_node
from interlock.core.model.joins import AFTER_FAILURE, READS_MISSING, join_decision, rule_of
from interlock.core.model.pipeline_spec import Node, PipelineSpec
from interlock.core.model.spec import StepSpec
from interlock.core.model.values import read_value, value_hash, write_value
from interlock.core.record.outcomes import Seen
from interlock.core.run.cache import LocalCache, cache_key
from interlock.core.run.runtime import execute_step, record_cache_hit
from interlock.core.run.state import RunContext

from .names import RunPlace

INPUTS_KEY = ".inputs-key"  # beside a node's values: the code and inputs they were made from
# What a record may say of a node; the first four are what the orchestrator saw (settle's Seen).
RAN = (str(Status.SUCCEEDED), str(Status.CACHED), str(Status.FAILED), str(Status.STOPPED))
RETRYING = "retrying"  # failed, and Airflow retries the task: settled as failed if no try succeeds
NOT_STARTED = (str(Status.SKIPPED), str(Status.NOT_RUN))


class Skip(Exception):
    """The node does not start: ``status`` (skipped, not-run) and why."""

    def __init__(self, status: Status, why: str):
        super().__init__(why)
        self.status, self.why = status, why


class Failed(Exception):
    """The node ran and failed (or was stopped): Airflow marks the task failed, not retried.
    ``str()``: the status; ``detail``: what the live line says of it."""

    def __init__(self, status: Status, detail: str = "", *, kind: str = "", retry_delay: float | None = None):
        super().__init__(str(status))
        self.status, self.detail, self.kind = status, detail, kind
        self.retry_delay = retry_delay  # not None: Airflow retries the task after this many seconds


@dataclass
class Records:
    """One JSON file per node under ``<run>/airflow/records``: what its task did."""

    folder: Path

    def write(self, node: str, status: Status | str, **facts: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{node}.tmp"
        tmp.write_text(json.dumps({"node": node, "status": str(status), **facts}))
        os.replace(tmp, self.folder / f"{node}.json")

    def all(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if not self.folder.is_dir():
            return out
        for path in self.folder.glob("*.json"):
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            out[rec["node"]] = rec
        return out

    def seen(self) -> dict[str, Seen]:
        """The nodes that ran (or were served from the cache) or were skipped, as ``settle`` takes them."""
        seen: dict[str, Seen] = {}
        for node, rec in self.all().items():
            if rec["status"] == RETRYING:
                rec = {**rec, "status": str(Status.FAILED)}
            if rec["status"] == str(Status.SKIPPED):  # by il.Skip, its join rule or a closed gate
                seen[node] = Seen(Status.SKIPPED)
                continue
            if rec["status"] not in RAN:
                continue
            error = None
            if rec.get("error") and not rec.get("shim_ran", True):
                e = rec["error"]
                error = StepFailed(node, FailureKind(e["kind"]), e["reason"], hint=e.get("hint"))
            seen[node] = Seen(Status(rec["status"]), error=error, shim_ran=rec.get("shim_ran", True),
                              duration_s=rec.get("duration_s"))
        return seen


EVENT = "\x1finterlock-airflow-event\x1f"  # starts a line that tells the watching process of a node


def tell(node: str, event: str | Status, detail: str = "") -> None:
    """A live event (started, a status) for the watching process (airflow-local's), if any."""
    from interlock.core.run import live

    if live.relay_mode():
        out = live.real(sys.stdout)
        out.write(EVENT + json.dumps({"node": node, "event": str(event), "detail": detail}) + "\n")
        out.flush()


def stop_file(run_dir: Path) -> Path:
    """Exists once the run was told to stop (SIGTERM, Ctrl-C): no task starts its node after it."""
    return run_dir / "airflow" / "stop"


class Outputs(Mapping[str, dict[str, Any]]):
    """The outputs of the nodes that succeeded in this run, read from their value folders on
    first use (a binding resolves ``outputs[node][port]``; a branch value looks at the keys)."""

    def __init__(self, worker: Worker):
        self.worker = worker
        self._read: dict[str, dict[str, Any]] = {}

    def _done(self) -> set[str]:
        return {n for n, r in self.worker.records.items() if r["status"] in (str(Status.SUCCEEDED), str(Status.CACHED))}

    def __getitem__(self, node: str) -> dict[str, Any]:
        if node not in self._read:
            if node not in self._done():
                raise KeyError(node)
            self._read[node] = self.worker.read_outputs(node)
        return self._read[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._done())

    def __len__(self) -> int:
        return len(self._done())

    def keys(self) -> Any:  # a set, as bindings.resolve intersects it with a branch's nodes
        return self._done()


class Worker:
    """One task's view of the run: the spec, the plan, the parameters and the run's folders."""

    def __init__(self, spec: PipelineSpec, place: RunPlace, params: Mapping[str, Any]):
        self.spec, self.place = spec, place
        self.params = {p.name: revive(params[p.name], p.type) if params.get(p.name) is not None else params.get(p.name)
                       for p in spec.params if p.name in params}
        for p in spec.params:
            if p.name not in self.params and p.has_default:
                self.params[p.name] = revive(p.default, p.type)
        self.run = RunContext(spec.name, place.run_id, place.backend, place.state_dir,
                              checkpoint_root=place.checkpoint_root, retry_in_process=place.retry_in_process,
                              on_cluster=place.on_cluster)
        self.book = Records(place.run_dir / "airflow" / "records")

    @cached_property
    def plan(self) -> Plan:
        return lower(self.spec)

    @cached_property
    def records(self) -> dict[str, dict[str, Any]]:
        return self.book.all()

    @cached_property
    def outputs(self) -> Outputs:
        return Outputs(self)

    def values_dir(self, node: str) -> Path:
        return self.place.run_dir / "values" / node

    # -- may the node start? ------------------------------------------------------------------
    def check_start(self, node: Node) -> None:
        """Raise Skip when ``node`` must not start: as the local backend decides, in plan order."""
        from interlock.core.run.bindings import gate_open

        if stop_file(self.place.run_dir).exists():
            raise Skip(Status.NOT_RUN, "the run was told to stop")
        # A finally step's failure stops no body step, but a `with il.finally_` block's ends its block
        # (as the local backend's): what follows the block does not start after it failed.
        from interlock.core.model.finally_blocks import blocks_ending_early

        finals = {n.name for n in self.spec.finally_nodes()} - blocks_ending_early(self.spec)
        from interlock.core.model.attempts import Tries, handled

        ok = handled(self.spec)  # a failure in an il.attempt() block: its fallback handles it
        tries = Tries(self.spec)
        for n, r in self.records.items():
            if n in ok and r["status"] == str(Status.FAILED):
                tries.record_failure(n)
        failed = [n for n, r in self.records.items() if r["status"] in (str(Status.FAILED), str(Status.STOPPED))
                  and n != node.name and n not in finals and not (n in ok and r["status"] == str(Status.FAILED))]
        if any(self.records[n]["status"] == str(Status.STOPPED) for n in failed):
            raise Skip(Status.NOT_RUN, "the run was stopped")
        if failed and self.spec.failure_policy != CONTINUE:
            raise Skip(Status.NOT_RUN, f"failure_policy='stop': {failed[0]} failed")
        why_not = tries.blocked(node.name)  # il.attempt(): after its failure, or a fallback not needed
        if why_not is not None:
            raise Skip(Status(why_not), "the attempt failed" if why_not == "not-run" else "the attempt succeeded")
        rule = rule_of(node)
        if failed and rule not in AFTER_FAILURE:  # one_succeeded, all_done: the join rule decides (below)
            downstream = Downstream(self.plan)
            for n in self.plan.nodes():
                if n.name == node.name:
                    break
                if self.records.get(n.name, {}).get("status") in (str(Status.FAILED), str(Status.NOT_RUN)) \
                        and n.name not in ok:
                    downstream.fail(n.name)
            if not downstream.can_start(node.name):
                raise Skip(Status.NOT_RUN, "it depends on a failed step")
        try:
            open_ = gate_open(self.spec, node.gate, self.outputs, self.params)
        except (KeyError, AttributeError):  # a condition on a value the run never produced
            open_ = False
        if not open_:
            raise Skip(Status.SKIPPED, "gate closed")
        blocked = join_decision(node, self._status_of)  # run_if (core/model/joins.py)
        if blocked is not None:
            raise Skip(*blocked)

    def _status_of(self, node: str) -> Status:
        """How an upstream ended, from its record: no record is a task Airflow skipped (a closed gate)."""
        status = self.records.get(node, {}).get("status")
        if status == RETRYING:
            return Status.FAILED
        return Status(status) if status else Status.SKIPPED

    def _decide(self, node: Node) -> None:
        try:
            self.check_start(node)
        except Skip as skip:
            self.book.write(node.name, skip.status, why=skip.why)
            if skip.status is Status.SKIPPED:
                tell(node.name, skip.status, skip.why)
            raise

    def gate_holds(self, gate_id: str) -> bool:
        """A gate task's decision: every condition around the block holds (False when a value
        it reads was never produced)."""
        from interlock.core.run.bindings import gate_open

        try:
            return gate_open(self.spec, gate_id, self.outputs, self.params)
        except (KeyError, AttributeError):
            return False

    # -- values -------------------------------------------------------------------------------
    def inputs_of(self, node: Node) -> dict[str, Any]:
        from interlock.core.model.attempts import attempt_spec, fallback_inputs, fallback_of
        from interlock.core.record.outcomes import run_status, settle
        from interlock.core.run.bindings import node_inputs

        inputs = node_inputs(self.spec, node.name, self.params, self.outputs,
                             missing_as_none=rule_of(node) in READS_MISSING)
        backup = fallback_of(self.spec, node.name)
        if backup is not None:  # the attempt's il.RunStatus, settled from the run state
            status = run_status(settle(attempt_spec(self.spec, backup), self.run.state, None))
            inputs = fallback_inputs(self.spec, node.name, inputs, status)
        return inputs

    def read_outputs(self, node: str) -> dict[str, Any]:
        n = self.spec.node(node)
        step = self.spec.step_of(n)
        folder = self.values_dir(node)
        if n.map is None:
            return {p.name: read_value(p.type, folder / p.name) for p in step.outputs}
        rec = self.records[node]
        ok = set(rec.get("ok", []))
        return {p.name: [read_value(p.type, folder / str(i) / p.name) if i in ok else None
                         for i in range(rec.get("items", 0))] for p in step.outputs}

    def write_outputs(self, step: StepSpec, values: dict[str, Any], dest: Path, key: str) -> None:
        """All of a node's outputs or none: written beside ``dest``, then renamed into place."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            for port in step.outputs:
                write_value(values[port.name], port.type, tmp / port.name)
            (tmp / INPUTS_KEY).write_text(key)
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- running ------------------------------------------------------------------------------
    def run_one(self, node: Node, name: str, inputs: dict[str, Any], dest: Path) -> tuple[Status, float]:
        """Run ``name`` (a node, or an il.map item) through the shim, or serve it from this
        run's earlier attempt or the cache; its outputs end in ``dest``. Raise Failed."""
        step = self.spec.step_of(node)
        use_cache = self.place.cache and step.cache is not None and step.cache.enabled
        key = cache_key(step, inputs) if use_cache else None
        full = key is not None and step.cache is not None and not step.cache.ignore_inputs
        inputs_key = key if full and key else _inputs_key(step, inputs)
        if self._earlier(name, dest, inputs_key):
            return Status.SUCCEEDED, 0.0
        shutil.rmtree(dest, ignore_errors=True)
        cache = LocalCache(self.place.cache_dir)
        attempt = len(self.run.state.resumes())
        hit = cache.get(step, key) if key else None
        if hit is not None and key:
            prov = cache.provenance(step, key)
            if prov.get("run_id") == self.run.run_id and prov.get("run_attempt", 0) == attempt:
                hit = None  # this very run wrote it (the same call twice): run it again, as elsewhere
        if hit is not None and key:
            record_cache_hit(self.run, step, name, cache.provenance(step, key))
            self.write_outputs(step, hit, dest, inputs_key)
            return Status.CACHED, 0.0
        try:
            result = execute_step(self.run, step, name, inputs)
        except StepStopped as exc:
            stop_file(self.place.run_dir).parent.mkdir(parents=True, exist_ok=True)
            stop_file(self.place.run_dir).touch()
            raise Failed(Status.STOPPED, exc.reason) from exc
        except StepFailed as exc:
            delay = self._airflow_retry(step, name, exc)
            raise Failed(Status.FAILED, f"{exc.kind}: {exc.reason}", kind=str(exc.kind), retry_delay=delay) from exc
        try:
            self.write_outputs(step, result.outputs, dest, inputs_key)
        except Exception as exc:  # noqa: BLE001 - a full disk, an unserializable value: the step failed
            reason = self._output_failed(step, name, exc)
            raise Failed(Status.FAILED, f"{FailureKind.FATAL}: {reason}") from exc
        if key:
            cache.put(step, key, result.outputs, {"run_id": self.run.run_id, "run_attempt": attempt,
                                                  "snapshots": result.snapshots, "facts": result.facts})
        return Status.SUCCEEDED, result.ended - result.started

    def _airflow_retry(self, step: StepSpec, name: str, exc: StepFailed) -> float | None:
        """With retries by Airflow: the delay before its next try, when the shim left the retry
        to the orchestrator (its budget allows one); None: the failure is final."""
        from .names import BY_AIRFLOW

        r = step.retry
        if not (self.place.airflow_retries and exc.backend_should_retry and (exc.kind in BY_AIRFLOW or r.retries_any)):
            return None
        if r.retries_any:  # Retry(N): Airflow retries any failure, after the step's wait if it has one
            n = len(self.run.state.failures_since_resume(name))
            return r.wait.delay(max(1, n)) if r.wait is not None else 0.0
        b = r.backoff
        if exc.kind is not FailureKind.CONTENTION or b is None:
            return 0.0
        n = sum(1 for f in self.run.state.failures_since_resume(name) if f.kind is FailureKind.CONTENTION)
        return b.delay(max(1, n))

    def _earlier(self, name: str, dest: Path, inputs_key: str) -> bool:
        """Did ``name`` succeed earlier in this run (before a resume) with these code and inputs?"""
        frag = self.run.state.read_fragment(name)
        marker = dest / INPUTS_KEY
        if frag is None or frag.status is not Status.SUCCEEDED or not marker.is_file():
            return False
        try:
            return marker.read_text() == inputs_key
        except (OSError, ValueError, SerializationError):
            return False

    def _output_failed(self, step: StepSpec, name: str, exc: BaseException) -> str:
        """The step returned but its outputs could not be written: its fragment says it failed."""
        from interlock.core.failure.rules import default_classifier
        from interlock.core.run.redact import Redactor

        classified = Redactor().fields((self.run.classifier or default_classifier).classify(exc))
        # The rule's reason is generic ("a value cannot cross the step boundary"): add which value and why.
        detail = f": {classified.message}" if classified.message and classified.message not in classified.reason else ""
        failure = replace(classified, kind=FailureKind.FATAL,
                          reason=f"its outputs could not be written after it returned: {classified.reason}{detail}")
        frag = self.run.state.read_fragment(name)
        if frag is not None:
            if frag.attempts:
                last = frag.attempts[-1]
                last.status, last.failure, last.decision = Status.FAILED, failure.to_dict(), "output write failed"
            self.run.state.write_fragment(replace(frag, status=Status.FAILED, ended=self.run.clock()))
        return failure.reason

    # -- the three kinds of task --------------------------------------------------------------
    def step_task(self, name: str) -> str:
        """A plain step: decide, run, record. Returns the value folder (XCom's reference)."""
        node = self.spec.node(name)
        self._decide(node)
        self._ran(name, lambda: self.run_one(node, name, self.inputs_of(node), self.values_dir(name)))
        return str(self.values_dir(name))

    def _ran(self, name: str, run: Any, note: str = "") -> None:
        """Run a node, record it and tell it live, as the local backend tells its steps."""
        tell(name, "started", note)
        try:
            status, took = run()
        except StepSkipped as exc:  # il.Skip: a skipped task, whose readers follow their trigger rules
            self.book.write(name, Status.SKIPPED, why=exc.why)
            tell(name, Status.SKIPPED, exc.why)
            raise Skip(Status.SKIPPED, exc.why) from None
        except Failed as exc:
            # A failure Airflow will retry is not a failure for good yet: no other step is held back by it.
            self.book.write(name, RETRYING if exc.retry_delay is not None else exc.status)
            tell(name, exc.status, exc.detail)
            raise
        self.book.write(name, status, duration_s=took)
        attempts = len(frag.attempts) if (frag := self.run.state.read_fragment(name)) else 0
        tell(name, status, "done in an earlier attempt of this run" if status is Status.SUCCEEDED and not took
             else f"{took:.2f}s, {attempts} attempt(s)" if status is Status.SUCCEEDED else "")

    def map_items(self, name: str) -> list[int]:
        """An il.map's first task: decide, then the item indices for dynamic task mapping."""
        node = self.spec.node(name)
        assert node.map is not None
        self._decide(node)
        tell(name, "started")
        inputs = self.inputs_of(node)
        lengths = {p: len(inputs[p]) for p in node.map.ports}
        if len(set(lengths.values())) > 1:  # no item runs, as on the other backends
            self.book.write(name, Status.FAILED, shim_ran=False, error={
                "kind": str(FailureKind.FATAL), "reason": f"il.zip over lists of different lengths {lengths}",
                "hint": "zip lists of one length"})
            tell(name, Status.FAILED, f"il.zip over lists of different lengths {lengths}")
            raise Failed(Status.FAILED)
        n = lengths[node.map.item]
        _write_json(self.values_dir(name) / "items.json", {"items": n})
        return list(range(n))

    def map_item(self, name: str, index: int) -> str:
        """One item of an il.map (a mapped task instance): its element of each mapped list."""
        node = self.spec.node(name)
        assert node.map is not None
        if stop_file(self.place.run_dir).exists():
            raise Skip(Status.NOT_RUN, "the run was told to stop")
        inputs = self.inputs_of(node)
        inputs.update({p: inputs[p][index] for p in node.map.ports})
        dest = self.values_dir(name) / str(index)
        try:
            self.run_one(node, item_node(name, index), inputs, dest)
        except StepSkipped as exc:  # a skipped task instance; the collect task counts it (None at its index)
            tell(item_node(name, index), Status.SKIPPED, exc.why)
            raise Skip(Status.SKIPPED, exc.why) from None
        except Failed as exc:  # the item's task fails; the map's collect task counts it
            tell(item_node(name, index), exc.status, exc.detail)
            raise
        return str(dest)

    def map_collect(self, name: str) -> str:
        """An il.map's last task (trigger rule all_done): fold the items into the node."""
        from interlock.core.run.map_items import MapReport, aggregate

        node = self.spec.node(name)
        if name in self.records:  # decided (skipped, not run, failed) by the map's first task
            raise Skip(Status(self.records[name]["status"]), "decided before the items")
        n = json.loads((self.values_dir(name) / "items.json").read_text())["items"]
        report = aggregate(self.spec, self.run.state, node, n) or MapReport(name, 0)
        frags = {i: self.run.state.read_fragment(item_node(name, i)) for i in range(n)}
        ok = [i for i, f in frags.items() if f is not None and f.status in (Status.SUCCEEDED, Status.CACHED)
              and (self.values_dir(name) / str(i) / INPUTS_KEY).is_file()]
        status = (Status.STOPPED if report.stopped else Status.FAILED if not report.succeeded
                  else Status.CACHED if n and len(report.cached) == n else Status.SUCCEEDED)
        self.book.write(name, status, items=n, ok=ok)
        tell(name, status, f"{n} item(s)")
        if status in (Status.FAILED, Status.STOPPED):
            raise Failed(status)
        return str(self.values_dir(name))

    def finally_task(self, name: str) -> str | None:
        """An il.finally_ step (trigger rule all_done): as the local backend runs it, with the
        status of its scope settled from the run state."""
        from interlock.core.model.finally_blocks import (
            block_gate,
            block_of,
            block_spec,
            finally_inputs,
            handler_runs,
            is_handler,
            reached,
        )
        from interlock.core.record.outcomes import StepOutcome, run_status, settle
        from interlock.core.run.bindings import gate_decisions, node_inputs

        spec = self.spec
        node = next(n for n in spec.finally_nodes() if n.name == name)
        gates = gate_decisions(spec, self.params, self.outputs)
        outcome = settle(spec, self.run.state, self.book.seen(), gates=gates)
        block = block_of(spec, name)
        if block is not None and block.node.name == name:
            gate = block_gate(spec, block)
            taken = gate is None or self.gate_holds(gate)
            if not (reached(spec, block, outcome.steps) and taken):
                status = Status.NOT_RUN if taken else Status.SKIPPED
                self.book.write(name, status, why="its block was not reached")
                raise Skip(status, "its block was not reached")
            scope = run_status(settle(block_spec(spec, block), self.run.state, None))
        else:  # the whole pipeline's: the body's status, the blocks' finally steps included
            failed = [n.name for n in spec.finally_nodes() if n.name != name
                      and self.records.get(n.name, {}).get("status") == str(Status.FAILED)]
            if failed and outcome.status is Status.SUCCEEDED:
                steps = {**outcome.steps, **{f: StepOutcome(Status.FAILED) for f in failed}}
                frag = self.run.state.read_fragment(failed[0])
                fail = frag.failures()[-1] if frag is not None and frag.failures() else None
                error = StepFailed(failed[0], fail.kind if fail else FailureKind.FATAL,
                                   fail.reason if fail else "its finally step failed", pipeline=spec.name)
                outcome = replace(outcome, status=Status.FAILED, steps=steps, error=error)
            scope = run_status(outcome)
        if is_handler(spec, name) and not handler_runs(scope):
            self.book.write(name, Status.SKIPPED, why=f"on failure only ({scope.status})")
            tell(name, Status.SKIPPED, f"on failure only ({scope.status})")
            raise Skip(Status.SKIPPED, f"on failure only ({scope.status})")
        inputs = finally_inputs(spec, node, node_inputs(spec, name, self.params, self.outputs, missing_as_none=True), scope)
        self._ran(name, lambda: self.run_one(node, name, inputs, self.values_dir(name)), f"finally ({scope.status})")
        return None


def _inputs_key(step: StepSpec, inputs: dict[str, Any]) -> str:
    parts = {"fingerprint": step.fingerprint,
             "inputs": {p.name: value_hash(inputs.get(p.name, p.default), p.type) for p in step.inputs}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
