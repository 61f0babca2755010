"""interlock: write a training pipeline once; run it on Flyte or Kubeflow Pipelines v2.

    import interlock as il

    @il.step(cache=il.Cache())
    def double(x: int) -> int:
        return 2 * x

    @il.pipeline
    def demo(x: int = 2):
        return double(x=x)

    il.run(demo, backend="local", x=21).outputs["o0"]  # 42

Importing this package is light: it loads the stdlib-only core. flytekit, kfp, mlflow and
friends load only when their adapter or plugin is used.
"""

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
from interlock.core.policies import Cache, CheckpointPolicy, Resources, Secret, Toleration, Torchrun
from interlock.core.retry import Backoff, Retry
from interlock.core.spec import PipelineSpec
from interlock.core.status import Status
from interlock.core.step import Step, step

__version__ = "0.1.0"

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
