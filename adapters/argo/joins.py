"""Join rules (``run_if=``) as Argo writes them: the task's enhanced ``depends`` expression over
its upstream tasks, and the receipt's verdict on the tasks Argo omitted for it.

Argo evaluates ``depends`` once every task it names has ended; a task whose expression is false
ends ``Omitted``, with no pod. An upstream is done when ``Succeeded`` (a memoized task too),
down when ``Failed`` or ``Errored``, skipped otherwise (``Skipped`` behind a ``when``,
``Omitted`` behind its own ``depends``):

============== ==========================================================
``run_if``     ``depends``
============== ==========================================================
none_failed    ``u.Succeeded`` for what it reads, ``!(u.Failed || u.Errored)`` for after=
all_succeeded  ``u.Succeeded && ...``
any_succeeded  ``(u.Succeeded || ...) && !(u.Failed || u.Errored) && ...``
one_succeeded  ``u.Succeeded || ...``
all_done       ``(u.Succeeded || u.Skipped || u.Omitted || u.Failed || u.Errored) && ...``
============== ==========================================================

Argo's ``Omitted`` does not say why: under failure_policy="continue" an upstream is also down
when it was omitted and one of the tasks its own ``depends`` names was down, and so on up
(``down_expr``); under ``failFast`` (failure_policy="stop") Argo starts nothing after a
failure, as the rule says, so failed or errored is enough. An input read from an upstream that produced nothing comes
as ``MISSING`` (an expression with a default: Argo cannot resolve an output of a task that
never ran), which the entry reads as None.
"""

from __future__ import annotations

from collections.abc import Callable

from interlock.core.base.status import Status
from interlock.core.model.joins import RunIf, join_decision
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunOutcome, StepOutcome

MISSING = "interlock:no-output"


def down_expr(task: str, deps: Callable[[str], set[str]], seen: frozenset[str] = frozenset()) -> str:
    """Did ``task`` end down: failed, or omitted behind a failure (``deps``: the tasks its own
    ``depends`` names)? Argo's ``Omitted`` alone does not say which."""
    behind = [down_expr(d, deps, seen | {task}) for d in sorted(deps(task) - seen - {task})]
    own = f"{task}.Failed || {task}.Errored"
    return f"{own} || ({task}.Omitted && ({' || '.join(behind)}))" if behind else own


def depends(rule: RunIf, tasks: dict[str, bool], down: Callable[[str], str]) -> str:
    """The ``depends`` expression of ``rule`` over ``tasks`` (task -> whether the step reads
    it); ``down(task)``: the expression saying that task ended down."""
    names = sorted(tasks)
    if rule is RunIf.NONE_FAILED:
        return " && ".join(f"{t}.Succeeded" if tasks[t] else f"!({down(t)})" for t in names)
    if rule is RunIf.ALL_SUCCEEDED:
        return " && ".join(f"{t}.Succeeded" for t in names)
    one = " || ".join(f"{t}.Succeeded" for t in names)
    if rule is RunIf.ONE_SUCCEEDED:
        return one
    if rule is RunIf.ANY_SUCCEEDED:
        return " && ".join([f"({one})", *(f"!({down(t)})" for t in names)])
    return " && ".join(f"({t}.Succeeded || {t}.Skipped || {t}.Omitted || {t}.Failed || {t}.Errored)"
                       for t in names)


def settle_joins(spec: PipelineSpec, outcome: RunOutcome) -> None:
    """A step Argo omitted (no fragment: the run state saw it not run) is skipped where its
    rule says so from how its upstreams ended, as the local runner decides it; not-run else."""
    if not any(n.run_if is not None for n in spec.nodes):
        return
    for n in spec.nodes:  # in the plan's order: upstreams first
        got = outcome.steps.get(n.name)
        if got is None or got.status is not Status.NOT_RUN or n.name in outcome.fragments:
            continue
        blocked = join_decision(n, lambda u: outcome.steps[u].status if u in outcome.steps else Status.NOT_RUN)
        if blocked is not None and blocked[0] is Status.SKIPPED:
            outcome.steps[n.name] = StepOutcome(Status.SKIPPED)

