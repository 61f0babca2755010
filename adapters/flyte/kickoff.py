"""A time trigger's ``time_input`` on Flyte 1: the kickoff time reaches the pipeline as text.

flyteadmin binds a launch plan's kickoff time (``kickoff_time_input_arg``) only to a
``datetime`` workflow input, and interlock's time parameter is a ``str`` (ISO 8601). So such a
trigger's launch plan runs a small workflow of its own, ``<pipeline>-<trigger>``: the same
inputs with that one a ``datetime``, a tiny task ``<pipeline>.kickoff`` writing it as ISO 8601
text, and the pipeline's workflow as a sub-workflow given that text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flytekit.core.python_function_task import PythonFunctionTask
from flytekit.core.workflow import PythonFunctionWorkflow, WorkflowFailurePolicy, WorkflowMetadata

KICKOFF_SUFFIX = "kickoff"


def kickoff_text(t: datetime) -> str:
    """The scheduled time as the ISO 8601 text interlock's time parameter takes."""
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).isoformat()


def kickoff_name(pipeline: str) -> str:
    return f"{pipeline}.{KICKOFF_SUFFIX}"


def build_kickoff(pipeline: str, image: str | None = None) -> PythonFunctionTask:
    """The task that turns the kickoff time into text: the smallest pod, as the closed branch's."""
    from flytekit import Resources

    from .resolver import resolver
    from .tasks import blank_task

    task = blank_task(PythonFunctionTask, kickoff_name(pipeline), KICKOFF_SUFFIX, KICKOFF_SUFFIX, None, pipeline)
    tiny = Resources(cpu="100m", mem="64Mi")
    extra = {"container_image": image} if image else {}
    PythonFunctionTask.__init__(task, task_config=None, task_function=kickoff_text, task_resolver=resolver,
                                requests=tiny, limits=tiny, **extra)
    return task


def kickoff_workflow(entities: Any, name: str, time_input: str, kickoff: PythonFunctionTask) -> PythonFunctionWorkflow:
    """``name``: the pipeline's inputs, ``time_input`` a datetime turned into text by ``kickoff``,
    and the pipeline's workflow called with them; its outputs are the pipeline's."""
    from .types import python_type, to_flyte
    from .workflow import workflow_defaults, workflow_function

    spec, main = entities.spec, entities.workflow
    types = {p.name: datetime if p.name == time_input else python_type(p.type) for p in spec.params}
    defaults = {p.name: to_flyte(p.default, p.type) for p in spec.params if p.has_default and p.name != time_input}

    def body(**kwargs: Any) -> Any:
        return main(**{**kwargs, time_input: kickoff(t=kwargs[time_input])})

    ret = main._workflow_function.__annotations__.get("return")  # the pipeline's outputs, as its workflow's
    fn = workflow_function(name.replace("-", "_").replace(".", "_"), types, defaults, ret, body)
    wf = PythonFunctionWorkflow(fn, metadata=WorkflowMetadata(on_failure=WorkflowFailurePolicy.FAIL_IMMEDIATELY), default_metadata=workflow_defaults())
    wf._name = name
    return wf
