"""The task resolver that lets a compiled interlock task run inside its container.

Tasks are built at run time from a PipelineSpec, so flytekit's default resolver (module +
variable name) cannot find them again. Ours writes loader args that name the pipeline
(``module:attribute``) and the node; inside the container it imports the pipeline, rebuilds
its spec and builds the same task again. The command line of a serialized task reads::

    pyflyte-execute ... --resolver interlock.adapters.flyte.resolver.resolver \
        -- pipeline tests.pkg.pipes:demo node train step train
"""

from __future__ import annotations

from typing import Any

from flytekit.core.base_task import Task, TaskResolverMixin
from flytekit.core.python_auto_container import PythonAutoContainerTask

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.refs import load_spec
from interlock.core.model.submaps import mapped_calls

LOCATION = "interlock.adapters.flyte.resolver.resolver"


def check_ref(spec: PipelineSpec) -> str:
    ref = spec.ref
    if not ref or ref.startswith("__main__:"):
        raise PipelineDefinitionError(
            f"pipeline reference {ref!r} cannot be imported inside a container", pipeline=spec.name,
            hint="define the pipeline in an importable module (not a script run as __main__)",
        )
    return ref


class InterlockTaskResolver(TaskResolverMixin):
    @property
    def location(self) -> str:
        return LOCATION

    def name(self) -> str:
        return "interlock"

    def loader_args(self, settings: Any, t: Any) -> list[str]:
        from .kickoff import KICKOFF_SUFFIX
        from .tasks import NOOP_SUFFIX

        if getattr(t, "interlock_node", None) == NOOP_SUFFIX:
            return ["noop", t.interlock_pipeline]
        if getattr(t, "interlock_node", None) == KICKOFF_SUFFIX:
            return ["kickoff", t.interlock_pipeline]
        ref = getattr(t, "interlock_pipeline_ref", None)
        if not ref:
            raise PipelineDefinitionError(f"task {t.name!r} was not built by the interlock Flyte adapter")
        return ["pipeline", ref, "node", t.interlock_node, "step", t.interlock_step]

    def load_task(self, loader_args: list[str]) -> PythonAutoContainerTask:
        from .tasks import build_noop, build_task

        if list(loader_args[:1]) == ["noop"]:  # pyflyte-execute passes a tuple
            return build_noop(loader_args[1])
        if list(loader_args[:1]) == ["kickoff"]:
            from .kickoff import build_kickoff

            return build_kickoff(loader_args[1])
        args = dict(zip(loader_args[::2], loader_args[1::2], strict=True))
        spec = load_spec(args["pipeline"])
        node = args["node"]
        if spec.finally_ is not None and node == spec.finally_.name:  # il.finally_: the failure node's task
            from .finally_node import build_finally_task

            return build_finally_task(spec)
        if any(b.node.name == node for b in spec.finally_blocks) or any(c.name == node for c in mapped_calls(spec)):
            # a block's finally task (typed by its sub-workflow), a mapped call's dynamic task (submap.py)
            from .workflow import build_entities

            return build_entities(spec).tasks[node]
        if spec.step_of(node).name != args.get("step", spec.step_of(node).name):
            raise PipelineDefinitionError(
                f"node {node!r} runs step {spec.step_of(node).name!r} in this image, "
                f"but the compiled task expected step {args['step']!r}",
                pipeline=spec.name, hint="rebuild the image from the code that was compiled",
            )
        return build_task(spec, node)

    def get_all_tasks(self) -> list[Task]:
        return []


resolver = InterlockTaskResolver()
