"""The Flyte adapter: a PipelineSpec as flytekit tasks, a workflow and launch plans.

    from interlock.adapters.flyte import build_entities, compile_to, serialize

    entities = build_entities(il.spec(pipeline))      # flytekit objects (tasks, workflow, sub-workflows)
    compile_to(il.spec(pipeline), "build/flyte", project="p", domain="development",
               version="v1", image="ghcr.io/team/img:v1")  # pyflyte-package protobufs + flyte-package.tgz

Backends (entry points): ``flyte`` compiles for a cluster, ``flyte-local`` runs through
flytekit's local execution. Importing this package imports flytekit.
"""

from .backend import FlyteBackend, FlyteLocalBackend, FlyteLocalOptions
from .compile import compile_to, launch_plans, serialize
from .resolver import InterlockTaskResolver, load_spec, resolver
from .tasks import TaskOptions, build_task, task_name
from .workflow import Entities, build_entities

__all__ = [
    "Entities", "FlyteBackend", "FlyteLocalBackend", "FlyteLocalOptions", "InterlockTaskResolver", "TaskOptions", "build_entities",
    "build_task", "compile_to", "launch_plans", "load_spec", "resolver", "serialize", "task_name",
]
