"""``failure_policy="continue"`` over the lowered plan: which steps may still start after failures.

A step may start unless something it needs is down: a step it reads or runs ``after=``, or
what a scope around it (an ``il.when`` block, a sub-pipeline call, an ``il.finally_`` block)
reads from outside, conditions included. A step that failed, stopped or did not start is
down, and so is every scope around it for the readers outside that scope: a KFP sub-DAG and a
Flyte sub-workflow with a failed node fail as a whole, and every backend agrees with them.
"""

from __future__ import annotations

from functools import cached_property

from interlock.core.backend.plan import Chain, Plan, Step, Unit
from interlock.core.model.conditions import condition_of
from interlock.core.model.subcalls import calls_after


class Downstream:
    """What failed in one run, and what that keeps from starting (core/model/failure_policy.py)."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.down: set[str] = set()  # nodes failed, stopped or not run
        self.failed_scopes: set[str] = set()
        self._needs: dict[str, frozenset[str]] = {}

    @cached_property
    def _scopes_of(self) -> dict[str, tuple[str, ...]]:
        found: dict[str, list[str]] = {}
        for key, members in self.plan.members.items():
            for m in members:
                found.setdefault(m, []).append(key)
        return {k: tuple(v) for k, v in found.items()}

    @cached_property
    def _call_after(self) -> dict[str, frozenset[str]]:
        return calls_after(self.plan.spec)

    @cached_property
    def _members(self) -> dict[str, frozenset[str]]:
        return {k: frozenset(v) for k, v in self.plan.members.items()}

    def needs(self, key: str) -> frozenset[str]:
        """What a scope (by key) reads from outside it: its members' inputs and its conditions."""
        if key not in self._needs:  # once per scope: asked for every node inside it
            self._needs[key] = frozenset(self._reads(key))
        return self._needs[key]

    def _reads(self, key: str) -> set[str]:
        spec = self.plan.spec
        inside = self._members.get(key, frozenset())
        ups: set[str] = set()
        for m in inside:
            ups |= spec.node(m).upstream() | self._call_after.get(m, frozenset())
        for g in self.plan.gates_in(key):
            ups |= {b.node for b in condition_of(spec.gate(g)).bindings() if b.node}
        return ups - inside

    def _blocked(self, needs: set[str] | frozenset[str], probe: str) -> bool:
        for u in needs:
            if u in self.down:
                return True
            if any(f in self.failed_scopes and probe not in self._members[f] for f in self._scopes_of.get(u, ())):
                return True
        return False

    def can_start(self, node: str) -> bool:
        """May this node start, with what is down so far?"""
        needs = set(self.plan.spec.node(node).upstream())
        for key in self._scopes_of.get(node, ()):
            needs |= self.needs(key)
        return not self._blocked(needs, node)

    def unit_can_start(self, unit: Unit) -> bool:
        """May this unit of a scope start (a backend that runs a block or a call as one node)?"""
        if isinstance(unit, Step):
            return self.can_start(unit.key)
        keys = _keys(unit)
        members = frozenset().union(*(self._members.get(k, frozenset()) for k in keys))
        needs = frozenset().union(*(self.needs(k) for k in keys)) - members
        return not members or not self._blocked(needs, min(members))

    def fail(self, node: str) -> None:
        """``node`` failed, stopped or did not start: down, with every scope around it."""
        self.down.add(node)
        self.failed_scopes.update(self._scopes_of.get(node, ()))

    def fail_unit(self, unit: Unit, ran: set[str]) -> None:
        """A unit ended failed (or did not start): each of its nodes that did not succeed is down."""
        if isinstance(unit, Step):
            if unit.key not in ran:
                self.fail(unit.key)
            return
        for k in _keys(unit):
            for n in self._members.get(k, frozenset()) - ran:
                self.fail(n)
            self.failed_scopes.add(k)


def _keys(unit: Unit) -> tuple[str, ...]:
    """The scope keys of a unit: an elif chain's blocks, else its own."""
    return tuple(b.key for b in unit.blocks) if isinstance(unit, Chain) else (unit.key,)
