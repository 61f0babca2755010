"""``il.attempt()`` and its fallback read from a spec: which steps are tried, which run only if
that failed, and what a failure inside an attempt means for the run (the authoring side is
``dsl/attempt.py``).

A failure inside an attempt block is *handled*: the attempt's remaining steps do not run, its
fallback block runs with the attempt's ``il.RunStatus``, and the run goes on; the failed step
still shows failed (RunResult.steps, the receipt), and the run fails only if something else
does (the fallback included). Without a failure the fallback block is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from interlock.core.model.codecs import qualname

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec


@dataclass(frozen=True)
class AttemptBlock:
    """One ``with il.attempt() as tried:`` block and its ``with tried.fallback():`` block."""

    name: str  # "attempt-<n>": names it in messages and run state
    members: tuple[str, ...]  # the tried steps, in recording order
    fallback: tuple[str, ...] = ()  # the steps that run only if the attempt failed

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "members": list(self.members), "fallback": list(self.fallback)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AttemptBlock:
        return cls(d["name"], tuple(d["members"]), tuple(d.get("fallback", ())))


def attempt_of(spec: PipelineSpec, node: str) -> AttemptBlock | None:
    """The attempt block a node is tried in, if any."""
    return next((a for a in spec.attempts if node in a.members), None)


def fallback_of(spec: PipelineSpec, node: str) -> AttemptBlock | None:
    """The attempt block whose fallback holds ``node``, if any."""
    return next((a for a in spec.attempts if node in a.fallback), None)


def handled(spec: PipelineSpec) -> frozenset[str]:
    """The nodes whose failure the run goes on after: every step tried in an attempt block."""
    return frozenset(m for a in spec.attempts for m in a.members)


def attempt_spec(spec: PipelineSpec, attempt: AttemptBlock) -> PipelineSpec:
    """The spec restricted to the attempt's steps, its failures not handled: what the fallback's
    ``il.RunStatus`` is settled over."""
    members = set(attempt.members)
    return replace(spec, nodes=tuple(n for n in spec.nodes if n.name in members), outputs=(), output_types=(),
                   finally_=None, finally_blocks=(), attempts=())


def status_ports(spec: PipelineSpec, node: str) -> list[str]:
    """The inputs of a fallback step that receive the attempt's ``il.RunStatus``."""
    from interlock.core.model.finally_blocks import RunStatus

    want = qualname(RunStatus)
    return [p.name for p in spec.step_of(node).inputs if p.type.name == want]


def fallback_inputs(spec: PipelineSpec, node: str, inputs: dict[str, Any], status: Any) -> dict[str, Any]:
    """A fallback step's inputs with the attempt's status filled in (what ``tried.failure`` stands for)."""
    return {**inputs, **{p: status for p in status_ports(spec, node)}}


class Tries:
    """How the attempt blocks of one run went, as a backend sees its steps end: which attempts
    failed (their remaining steps do not start; their fallback runs) — one rule for every backend."""

    def __init__(self, spec: PipelineSpec):
        self.spec = spec
        self.failed: set[str] = set()

    def record_failure(self, node: str) -> bool:
        """A step failed: True when the failure is handled (it was tried in an attempt block)."""
        a = attempt_of(self.spec, node)
        if a is None:
            return False
        self.failed.add(a.name)
        return True

    def blocked(self, node: str) -> str | None:
        """Why ``node`` does not start because of an attempt block ("not-run" or "skipped"), or None."""
        a = attempt_of(self.spec, node)
        if a is not None and a.name in self.failed:
            return "not-run"  # as after an exception in a `try:` block
        f = fallback_of(self.spec, node)
        if f is not None and f.name not in self.failed:
            return "skipped"  # the attempt did not fail: nothing to fall back from
        return None
