"""The Flyte adapter: a PipelineSpec as flytekit tasks, a workflow and launch plans.

Backends (entry points): ``flyte`` compiles for a cluster, ``flyte-local`` runs through
flytekit's local execution (``backend.py``; it imports core only, so `interlock backends`
reads the capabilities without flytekit). Import each name from its module::

    from interlock.adapters.flyte.workflow import build_entities
    from interlock.adapters.flyte.compile import compile_to, serialize

    entities = build_entities(il.spec(pipeline))      # flytekit objects (tasks, workflow, sub-workflows)
    compile_to(il.spec(pipeline), "build/flyte", project="p", domain="development",
               version="v1", image="ghcr.io/team/img:v1")  # pyflyte-package protobufs + flyte-package.tgz
"""
