"""Join rules: when a step starts, from what its upstreams did (``run_if=``), and the build-time
checks that go with them and with steps that may skip themselves (``il.Skip``).

A step's upstreams are the nodes it reads and those it runs ``after=``. Each ended done
(succeeded or cached), skipped (behind a closed il.when block, by its own ``il.Skip``, or by
its own join rule), or down (failed, stopped, or not run behind a failure). The vocabulary is
Airflow's trigger rules under portable names, so Airflow renders them natively:

============== ===================================================== ==========================
``run_if``     the step runs when                                    Airflow
============== ===================================================== ==========================
none_failed    no upstream is down (the default); an input from a    none_failed
               skipped upstream does not exist, so its reader skips
all_succeeded  every upstream is done                                all_success
any_succeeded  no upstream is down and at least one is done (the     none_failed_min_one_success
               join after a branch)
one_succeeded  at least one upstream is done                         one_success
all_done       every upstream ended, whatever its state              all_done
============== ===================================================== ==========================

A step whose rule is not met is ``skipped``, or ``not-run`` when an upstream is down (Airflow's
``upstream_failed``). Under the last three rules an input from an upstream that produced
nothing reads as None: the input must be Optional (checked at build, ``check_joins``). Under
``failure_policy="stop"`` a failure still starts nothing new, whatever the rule: the rules
that run after a failure (``one_succeeded``, ``all_done``) do so under ``"continue"``; a
cleanup that must run is an ``il.finally_``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from interlock.core.base.errors import PipelineDefinitionError, PolicyError
from interlock.core.base.status import Status
from interlock.core.base.suggest import did_you_mean
from interlock.core.model.spec import BindingKind

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import Node, PipelineSpec


class RunIf(StrEnum):
    NONE_FAILED = "none_failed"
    ALL_SUCCEEDED = "all_succeeded"
    ANY_SUCCEEDED = "any_succeeded"
    ONE_SUCCEEDED = "one_succeeded"
    ALL_DONE = "all_done"


DEFAULT = RunIf.NONE_FAILED
# Rules under which the step may run although an upstream produced nothing: its input reads None.
READS_MISSING = frozenset({RunIf.ANY_SUCCEEDED, RunIf.ONE_SUCCEEDED, RunIf.ALL_DONE})
# Rules under which the step may run although an upstream is down (failure_policy="continue").
AFTER_FAILURE = frozenset({RunIf.ONE_SUCCEEDED, RunIf.ALL_DONE})


def check_run_if(value: object, *, pipeline: str | None = None, step: str | None = None) -> RunIf:
    """``value`` as a RunIf; an unknown one is refused with the closest name."""
    if isinstance(value, RunIf):
        return value
    names = [r.value for r in RunIf]
    if isinstance(value, str) and value in names:
        return RunIf(value)
    close = did_you_mean(str(value), names) if isinstance(value, str) else None
    raise PolicyError(
        f"run_if={value!r} is not a join rule; rules are {names}", pipeline=pipeline, step=step,
        hint=close or 'run_if="any_succeeded" runs a join after a branch: none failed, one succeeded',
    )


def rule_of(node: Node) -> RunIf:
    return RunIf(node.run_if) if node.run_if else DEFAULT


def _done(s: Status) -> bool:
    return s in (Status.SUCCEEDED, Status.CACHED)


def _down(s: Status) -> bool:
    return s in (Status.FAILED, Status.STOPPED, Status.NOT_RUN, Status.KILLED)


def join_blocked(rule: RunIf, upstream: Mapping[str, Status], reads: set[str]) -> tuple[Status, str] | None:
    """Whether a step with this rule starts, given how each upstream ended: None when it
    starts, else the status it ends with (skipped, or not-run behind a failure) and why.
    ``reads``: the upstreams whose outputs it reads (the rest it runs ``after=``)."""
    if not upstream or rule is RunIf.ALL_DONE:
        return None
    down = sorted(n for n, s in upstream.items() if _down(s))
    done = [n for n, s in upstream.items() if _done(s)]
    skipped = sorted(n for n, s in upstream.items() if not _done(s) and not _down(s))
    if rule is RunIf.ONE_SUCCEEDED:
        if done:
            return None
        return (Status.NOT_RUN, f"no upstream succeeded ({down[0]} failed)") if down else (
            Status.SKIPPED, f"no upstream succeeded ({', '.join(skipped)} skipped)")
    if down:
        return Status.NOT_RUN, f"{down[0]} failed"
    if rule is RunIf.ANY_SUCCEEDED:
        return None if done else (Status.SKIPPED, f"no upstream succeeded ({', '.join(skipped)} skipped)")
    if rule is RunIf.ALL_SUCCEEDED:
        return (Status.SKIPPED, f"{skipped[0]} was skipped") if skipped else None
    missing = sorted(set(skipped) & reads)  # none_failed: what it reads must exist
    return (Status.SKIPPED, f"{missing[0]} was skipped: its output does not exist") if missing else None


def join_decision(node: Node, status_of: Callable[[str], Status]) -> tuple[Status, str] | None:
    """``join_blocked`` for a node, each upstream's status read with ``status_of``."""
    ups, reads = upstreams(node)
    return join_blocked(rule_of(node), {u: status_of(u) for u in sorted(ups)}, reads)


def upstreams(node: Node) -> tuple[set[str], set[str]]:
    """The nodes a node's rule looks at, and those of them whose outputs it reads (the rest it
    runs ``after=``)."""
    # A branch value (il.branch_value) is the chain's to resolve: the branches not taken are
    # skipped by design, so its options are not upstreams here.
    reads = {u for _, b in node.inputs if b.kind is not BindingKind.ONE_OF for u in b.nodes()}
    branches = {u for _, b in node.inputs if b.kind is BindingKind.ONE_OF for u in b.nodes()}
    return (reads | set(node.after)) - (branches - reads - set(node.after)), reads


# -- build time -----------------------------------------------------------------------------------
def _gates(spec: PipelineSpec, node: Node) -> list[str]:
    return [g.id for g in spec.gate_chain(node.gate)]


def may_not_produce(spec: PipelineSpec, node: str, reader: Node) -> bool:
    """Can ``node`` end without outputs while ``reader`` runs (under the reader's own rule)?
    Behind an il.when block the reader is not in, a step that may skip itself, or a step that
    may itself be skipped by what it reads; after a failure too when the reader runs after one."""
    if rule_of(reader) in AFTER_FAILURE and spec.failure_policy == "continue":
        return True
    seen: set[str] = set()
    frontier = [node]
    inside = set(_gates(spec, reader))
    while frontier:
        name = frontier.pop()
        if name in seen:
            continue
        seen.add(name)
        n = spec.node(name)
        if not set(_gates(spec, n)) <= inside or spec.step_of(n).may_skip:
            return True
        rule = rule_of(n)
        ups = n.upstream() if rule in (RunIf.ALL_SUCCEEDED, RunIf.ANY_SUCCEEDED, RunIf.ONE_SUCCEEDED) else (
            {u for _, b in n.inputs for u in b.nodes()} if rule is RunIf.NONE_FAILED else set())
        frontier.extend(ups)
    return False


def check_joins(spec: PipelineSpec) -> None:
    """Refuse, before a run, an input that may read a value that never existed: one from an
    upstream that may produce nothing, where the step's rule runs it anyway (it must be
    Optional), and a pipeline output from such a step."""
    for n in spec.nodes:
        rule = rule_of(n)
        if rule not in READS_MISSING:
            continue
        step = spec.step_of(n)
        for port, b in n.inputs:
            if b.kind is not BindingKind.OUTPUT or not b.node:
                continue
            t = step.input(port)
            if t is not None and not t.type.optional and may_not_produce(spec, b.node, n):
                raise PipelineDefinitionError(
                    f"run_if={rule.value!r} runs this step when {b.node!r} produced nothing, and then its input "
                    f"reads None, but the input is {t.type.describe()}", pipeline=spec.name, step=n.name, port=port,
                    hint=f"declare it Optional ({port}: {t.type.describe()} | None = None), or keep the default "
                    "rule: the step is then skipped with its upstream",
                )
    for out, b in spec.outputs:
        # A map of such a step still makes its list (None at a skipped item).
        if b.kind is BindingKind.OUTPUT and b.node and spec.step_of(b.node).may_skip and spec.node(b.node).map is None:
            raise PipelineDefinitionError(
                f"pipeline output {out!r} comes from {b.describe()}, a step that may skip itself",
                pipeline=spec.name, step=b.node, hint="return only outputs of steps that always produce them",
            )
