"""The Flyte adapter: a PipelineSpec as flytekit tasks, a workflow and launch plans.

    from interlock.adapters.flyte import build_entities, compile_to, serialize

    entities = build_entities(il.spec(pipeline))      # flytekit objects (tasks, workflow, sub-workflows)
    compile_to(il.spec(pipeline), "build/flyte", project="p", domain="development",
               version="v1", image="ghcr.io/team/img:v1")  # pyflyte-package protobufs + flyte-package.tgz

Backends (entry points): ``flyte`` compiles for a cluster, ``flyte-local`` runs through
flytekit's local execution. Importing this package is light: flytekit loads with the first
name that needs it (``build_entities``, ``compile_to``, ...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives. Loaded on first use (PEP 562): the backends' entry points
# name ``interlock.adapters.flyte.backend``, and `interlock backends` reads their
# capabilities without importing flytekit (``backend.py`` imports core only).
_EXPORTS = {
    "FlyteBackend": "backend", "FlyteLocalBackend": "backend", "FlyteLocalOptions": "backend",
    "compile_to": "compile", "launch_plans": "compile", "serialize": "compile",
    "InterlockTaskResolver": "resolver", "load_spec": "resolver", "resolver": "resolver",
    "TaskOptions": "tasks", "build_task": "tasks", "task_name": "tasks",
    "Entities": "workflow", "build_entities": "workflow",
}

__all__ = [
    "Entities", "FlyteBackend", "FlyteLocalBackend", "FlyteLocalOptions", "InterlockTaskResolver", "TaskOptions", "build_entities",
    "build_task", "compile_to", "launch_plans", "load_spec", "resolver", "serialize", "task_name",
]

if TYPE_CHECKING:
    from .backend import FlyteBackend, FlyteLocalBackend, FlyteLocalOptions
    from .compile import compile_to, launch_plans, serialize
    from .resolver import InterlockTaskResolver, load_spec, resolver
    from .tasks import TaskOptions, build_task, task_name
    from .workflow import Entities, build_entities


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
