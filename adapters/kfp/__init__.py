"""Kubeflow Pipelines v2 adapter: compile a PipelineSpec to kfp components and IR YAML, and run
it locally through kfp.local. kfp is imported only when a function here needs it.

Import each name from its module: ``backend`` (the two backends; core only, so `interlock
backends` reads their capabilities without kfp), ``compile`` (``compile_pipeline``),
``policies`` (``KfpOptions``, ``KfpLocalOptions``), ``image`` (the Dockerfile). A KFP task
process imports ``entry`` only.
"""
