"""interlock: write a training pipeline once; run it on Flyte or Kubeflow Pipelines v2.

    import interlock as il

    @il.step(cache=il.Cache())
    def double(x: int) -> int:
        return 2 * x

    @il.pipeline
    def demo(x: int = 2):
        return double(x=x)

    il.run(demo, backend="local", x=21).outputs["o0"]  # 42

Importing this package is light: it loads no module of the core until a name is used
(PEP 562), and the core needs only the standard library, xxhash and croniter. flytekit, kfp, mlflow
and friends load only when their adapter or plugin is used. This module is the one face of
the public names; each lives in one module of ``interlock.core`` (``_EXPORTS``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the interlock.core module that defines it; imported on first use.
_EXPORTS = {
    "compile": "backend.api", "run": "backend.api",
    "BackendOptions": "backend.protocol", "Capabilities": "backend.protocol",
    "CapabilityError": "base.errors", "InterlockError": "base.errors", "PipelineDefinitionError": "base.errors", "PolicyError": "base.errors", "RunFailed": "base.errors", "RunIdError": "base.errors", "RunInProgress": "base.errors", "Skip": "base.errors", "StepFailed": "base.errors", "StepStopped": "base.errors", "ValidationFailed": "base.errors",
    "FailureKind": "base.status", "Status": "base.status",
    "CheckpointStore": "checkpoint.checkpointer",
    "attempt": "dsl.attempt",
    "branch_value": "dsl.branches", "elif_": "dsl.branches", "otherwise": "dsl.branches",
    "when": "dsl.build",
    "map": "dsl.fanout", "zip": "dsl.fanout",
    "finally_": "dsl.finally_", "on_failure": "dsl.finally_",
    "GateDecision": "dsl.gates", "champion_gate": "dsl.gates",
    "Pipeline": "dsl.pipeline", "pipeline": "dsl.pipeline", "spec": "dsl.pipeline",
    "Step": "dsl.step", "step": "dsl.step",
    "Preempted": "failure.taxonomy", "StepTimeout": "failure.taxonomy", "classify": "failure.rules", "register_rule": "failure.rules",
    "Failure": "failure.record",
    "Rule": "failure.rules",
    "Dataset": "model.artifacts", "Metrics": "model.artifacts", "Model": "model.artifacts",
    "Backoff": "model.backoff",
    "Cause": "model.triggers", "Cron": "model.triggers", "Every": "model.triggers", "OnData": "model.triggers", "OnDrift": "model.triggers",
    "RunStatus": "model.finally_blocks",
    "PipelineSpec": "model.pipeline_spec",
    "Cache": "model.policies", "Resources": "model.policies",
    "CheckpointPolicy": "model.policies_opt_in", "Secret": "model.policies_opt_in", "Toleration": "model.policies_opt_in", "Torchrun": "model.policies_opt_in",
    "Retry": "model.retry",
    "RunResult": "record.outcomes", "StepOutcome": "record.outcomes",
    "StepContext": "run.context",
}

__all__ = [
    "BackendOptions",
    "Backoff",
    "Cache",
    "Capabilities",
    "CapabilityError",
    "CheckpointPolicy",
    "CheckpointStore",
    "Cause",
    "Cron",
    "Dataset",
    "Every",
    "Failure",
    "FailureKind",
    "GateDecision",
    "InterlockError",
    "Metrics",
    "Model",
    "OnData",
    "OnDrift",
    "Pipeline",
    "PipelineDefinitionError",
    "PipelineSpec",
    "PolicyError",
    "Preempted",
    "Resources",
    "Retry",
    "Rule",
    "RunFailed",
    "RunIdError",
    "RunInProgress",
    "RunResult",
    "RunStatus",
    "Secret",
    "Skip",
    "Status",
    "Step",
    "StepContext",
    "StepFailed",
    "StepOutcome",
    "StepStopped",
    "StepTimeout",
    "Toleration",
    "Torchrun",
    "ValidationFailed",
    "attempt",
    "branch_value",
    "champion_gate",
    "classify",
    "compile",
    "elif_",
    "finally_",
    "map",
    "on_failure",
    "otherwise",
    "pipeline",
    "register_rule",
    "run",
    "spec",
    "step",
    "when",
    "zip",
]

if TYPE_CHECKING:  # type checkers and IDEs see every name as if imported here
    from interlock.core.backend.api import compile, run
    from interlock.core.backend.protocol import BackendOptions, Capabilities
    from interlock.core.base.errors import (
        CapabilityError,
        InterlockError,
        PipelineDefinitionError,
        PolicyError,
        RunFailed,
        RunIdError,
        RunInProgress,
        Skip,
        StepFailed,
        StepStopped,
        ValidationFailed,
    )
    from interlock.core.base.status import FailureKind, Status
    from interlock.core.checkpoint.store import CheckpointStore
    from interlock.core.dsl.attempt import attempt
    from interlock.core.dsl.branches import branch_value, elif_, otherwise
    from interlock.core.dsl.build import when
    from interlock.core.dsl.fanout import map, zip
    from interlock.core.dsl.finally_ import finally_, on_failure
    from interlock.core.dsl.gates import GateDecision, champion_gate
    from interlock.core.dsl.pipeline import Pipeline, pipeline, spec
    from interlock.core.dsl.step import Step, step
    from interlock.core.failure.record import Failure
    from interlock.core.failure.rules import Rule, classify, register_rule
    from interlock.core.failure.taxonomy import Preempted, StepTimeout
    from interlock.core.model.artifacts import Dataset, Metrics, Model
    from interlock.core.model.backoff import Backoff
    from interlock.core.model.finally_blocks import RunStatus
    from interlock.core.model.pipeline_spec import PipelineSpec
    from interlock.core.model.policies import Cache, Resources
    from interlock.core.model.policies_opt_in import CheckpointPolicy, Secret, Toleration, Torchrun
    from interlock.core.model.retry import Retry
    from interlock.core.model.triggers import Cause, Cron, Every, OnData, OnDrift
    from interlock.core.record.outcomes import RunResult, StepOutcome
    from interlock.core.run.context import StepContext


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"interlock.core.{module}"), name)
    globals()[name] = value  # once: later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
