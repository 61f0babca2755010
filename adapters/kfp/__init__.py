"""Kubeflow Pipelines v2 adapter: compile a PipelineSpec to kfp components and IR YAML, and run
it locally through kfp.local. kfp is imported only when a function here needs it.

The names below load on first use (PEP 562): a KFP task process imports ``entry`` only, and
`interlock backends` reads ``backend``'s capabilities, without the compiler and image modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "KfpBackend": "backend", "KfpLocalBackend": "backend",
    "BuiltPipeline": "compile", "build_pipeline": "compile", "compile_pipeline": "compile",
    "dockerfile": "image", "requirements": "image", "write_image_files": "image",
    "KfpLocalOptions": "policies", "KfpOptions": "policies", "retry_mapping": "policies",
}

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

if TYPE_CHECKING:
    from .backend import KfpBackend, KfpLocalBackend
    from .compile import BuiltPipeline, build_pipeline, compile_pipeline
    from .image import dockerfile, requirements, write_image_files
    from .policies import KfpLocalOptions, KfpOptions, retry_mapping


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
