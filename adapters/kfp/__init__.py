"""Kubeflow Pipelines v2 adapter: compile a PipelineSpec to kfp components and IR YAML, and run
it locally through kfp.local. kfp is imported only when a function here needs it."""

from .backend import KfpBackend, KfpLocalBackend
from .compile import BuiltPipeline, build_pipeline, compile_pipeline
from .image import dockerfile, requirements, write_image_files
from .policies import KfpLocalOptions, KfpOptions, retry_mapping

__all__ = [
    "BuiltPipeline",
    "KfpBackend",
    "KfpLocalBackend",
    "KfpLocalOptions",
    "KfpOptions",
    "build_pipeline",
    "compile_pipeline",
    "dockerfile",
    "requirements",
    "retry_mapping",
    "write_image_files",
]
