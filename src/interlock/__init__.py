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
(PEP 562), and the core is stdlib-only. flytekit, kfp, mlflow and friends load only when
their adapter or plugin is used. Every KFP task process imports this package first (its
component calls ``interlock.adapters.kfp.entry``), so what it loads is paid once per task.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the interlock.core module that defines it; imported on first use.
_EXPORTS = {
    "compile": "api", "run": "api",
    "Dataset": "artifacts", "Metrics": "artifacts", "Model": "artifacts",
    "BackendOptions": "backends", "Capabilities": "backends", "RunResult": "backends", "StepOutcome": "backends",
    "branch_value": "branches", "elif_": "branches", "otherwise": "branches",
    "when": "build",
    "CheckpointStore": "checkpoint",
    "StepContext": "context",
    "CapabilityError": "errors", "InterlockError": "errors", "PipelineDefinitionError": "errors",
    "PolicyError": "errors", "RunFailed": "errors", "RunIdError": "errors", "RunInProgress": "errors",
    "StepFailed": "errors", "StepStopped": "errors", "ValidationFailed": "errors",
    "Failure": "failures", "FailureKind": "failures", "Preempted": "failures", "Rule": "failures",
    "StepTimeout": "failures", "classify": "failures", "register_rule": "failures",
    "map": "fanout_build",
    "RunStatus": "finally_", "finally_": "finally_",
    "GateDecision": "gates", "champion_gate": "gates",
    "Pipeline": "pipeline", "pipeline": "pipeline", "spec": "pipeline",
    "Cache": "policies", "CheckpointPolicy": "policies", "Resources": "policies", "Secret": "policies",
    "Toleration": "policies", "Torchrun": "policies",
    "Backoff": "retry", "Retry": "retry",
    "PipelineSpec": "spec",
    "Status": "status",
    "Step": "step", "step": "step",
}

__all__ = [
    "BackendOptions",
    "Backoff",
    "Cache",
    "Capabilities",
    "CapabilityError",
    "CheckpointPolicy",
    "CheckpointStore",
    "Dataset",
    "Failure",
    "FailureKind",
    "GateDecision",
    "InterlockError",
    "Metrics",
    "Model",
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
    "branch_value",
    "champion_gate",
    "classify",
    "compile",
    "elif_",
    "finally_",
    "map",
    "otherwise",
    "pipeline",
    "register_rule",
    "run",
    "spec",
    "step",
    "when",
]

if TYPE_CHECKING:  # type checkers and IDEs see every name as if imported here
    from interlock.core.api import compile, run
    from interlock.core.artifacts import Dataset, Metrics, Model
    from interlock.core.backends import BackendOptions, Capabilities, RunResult, StepOutcome
    from interlock.core.branches import branch_value, elif_, otherwise
    from interlock.core.build import when
    from interlock.core.checkpoint import CheckpointStore
    from interlock.core.context import StepContext
    from interlock.core.errors import (
        CapabilityError,
        InterlockError,
        PipelineDefinitionError,
        PolicyError,
        RunFailed,
        RunIdError,
        RunInProgress,
        StepFailed,
        StepStopped,
        ValidationFailed,
    )
    from interlock.core.failures import (
        Failure,
        FailureKind,
        Preempted,
        Rule,
        StepTimeout,
        classify,
        register_rule,
    )
    from interlock.core.fanout_build import map
    from interlock.core.finally_ import RunStatus, finally_
    from interlock.core.gates import GateDecision, champion_gate
    from interlock.core.pipeline import Pipeline, pipeline, spec
    from interlock.core.policies import (
        Cache,
        CheckpointPolicy,
        Resources,
        Secret,
        Toleration,
        Torchrun,
    )
    from interlock.core.retry import Backoff, Retry
    from interlock.core.spec import PipelineSpec
    from interlock.core.status import Status
    from interlock.core.step import Step, step


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"interlock.core.{module}"), name)
    globals()[name] = value  # once: later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
