"""The importable reference of a pipeline defined in a script run as ``python file.py``.

Such a pipeline lives in ``__main__``, a name no container (and no kfp-local task process)
can import. Its file can be: under the dotted name its package layout gives it, the same
name ``interlock run file.py`` imports it by. The script's ``if __name__ == "__main__":``
block does not run on that import, so a task never starts the run again.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec


def module_name_for(path: Path) -> tuple[str, Path]:
    """(dotted module name, the sys.path entry that makes it importable) for a .py file."""
    path = path.resolve()
    parts = [path.stem]
    root = path.parent
    while (root / "__init__.py").exists():
        parts.insert(0, root.name)
        root = root.parent
    return ".".join(parts), root


def importable_module(module: str) -> str:
    """``module``, or for ``__main__`` the name its file is importable by (when it has one)."""
    if module != "__main__":
        return module
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    if not file or not str(file).endswith(".py"):
        return module  # an interactive session or python -c: nothing to import
    name, root = module_name_for(Path(file))
    if str(root) not in sys.path:
        sys.path.append(str(root))  # this process's subprocesses (kfp-local tasks) inherit it
    return name







# Set while a module is imported by reference: a step's task process (a KFP pod, a Flyte
# container, a rank) finding its function. Its pipelines were checked when they were compiled,
# so ``@il.pipeline`` does not build them there: one step's start would pay for the whole graph.
_BY_REFERENCE: contextvars.ContextVar[bool] = contextvars.ContextVar("interlock_import_by_reference", default=False)


def importing_by_reference() -> bool:
    """True while ``import_ref`` imports a module (see ``_BY_REFERENCE``)."""
    return _BY_REFERENCE.get()


def import_ref(ref: str) -> Any:
    """The object a ``module:qualname`` reference names (raises ImportError or AttributeError)."""
    module_name, _, qual = ref.partition(":")
    if not module_name or not qual:
        raise ImportError(f"reference {ref!r} is not 'module:qualname'")
    token = _BY_REFERENCE.set(True)
    try:
        obj: Any = importlib.import_module(module_name)
    finally:
        _BY_REFERENCE.reset(token)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


@functools.cache
def load_spec(ref: str) -> PipelineSpec:
    """Rebuild a PipelineSpec inside a container from ``module:attr`` (a pipeline or a spec)."""
    try:
        obj = import_ref(ref)
    except (ImportError, AttributeError) as exc:
        raise PipelineDefinitionError(
            f"cannot import pipeline {ref!r}: {exc}",
            hint="the pipeline's module must be importable in the step's image (installed or on PYTHONPATH)",
        ) from exc
    from interlock.core.model.pipeline_spec import PipelineSpec

    spec = obj if isinstance(obj, PipelineSpec) else getattr(obj, "spec", None)  # an @il.pipeline's
    if isinstance(spec, PipelineSpec):
        return spec
    raise PipelineDefinitionError(f"{ref} is neither an @il.pipeline nor a PipelineSpec")
