"""Importing a compiled module from its file, as `flyte run FILE` does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_module(path: Path) -> ModuleType:
    """The compiled module, imported from its file as `flyte run FILE` does."""
    name = f"_compiled_{path.stem}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def rank_entry(path: str, task: str, kwargs: dict[str, str]) -> str:
    """What the SDK's PyTorch plugin runs in each worker of a pod (its launcher_entrypoint, less
    the SDK's own init): the compiled task's function, with the task's inputs."""
    return getattr(import_module(Path(path)), task).func(**kwargs)
