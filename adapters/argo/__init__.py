"""The ``argo`` backend: Argo Workflows manifests (Workflow, WorkflowTemplate, CronWorkflow)
rendered from the lowered plan and validated with hera's models. Compile only."""
