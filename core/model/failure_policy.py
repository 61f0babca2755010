"""A pipeline's failure policy: what starts after a step fails (``il.pipeline(failure_policy=)``).

``"stop"`` (the default): nothing new starts; steps already running finish; every step that
did not start is ``not-run``. ``"continue"``: every step that does not depend on a failed step
runs (KFP's own behaviour, Flyte ``WorkflowFailurePolicy.FAIL_AFTER_EXECUTABLE_NODES_COMPLETE``,
Argo ``failFast: false``); its dependents are ``not-run``. Either way the run is failed.

A step depends on a failed one through its inputs, ``after=``, the conditions of the
``il.when`` blocks around it, and what the scopes around it (a block, a sub-pipeline call,
an ``il.finally_`` block) read from outside them; and a failure inside a scope fails the
scope for every reader outside it, as a failed KFP sub-DAG or Flyte sub-workflow does
(core/backend/failure_scope.py applies this to the lowered plan).
"""

from __future__ import annotations

from interlock.core.base.errors import PipelineDefinitionError

STOP = "stop"
CONTINUE = "continue"
POLICIES = (STOP, CONTINUE)


def check_failure_policy(policy: object, pipeline: str) -> str:
    """The policy, or a refusal naming the choices (raised when the pipeline is declared)."""
    if policy not in POLICIES:
        raise PipelineDefinitionError(
            f"failure_policy={policy!r} is not a failure policy", pipeline=pipeline,
            hint='@il.pipeline(failure_policy="stop") (the default: start nothing new after a failure) or '
            'failure_policy="continue" (run every step that does not depend on the failure)',
        )
    return str(policy)
