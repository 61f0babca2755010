"""Finding a pipeline from the command line: ``path/to/file.py[:name]`` or ``package.module[:name]``.

A file is imported under the dotted module name its package layout gives it (walking up
through ``__init__.py`` files), so the step references recorded in the spec are the ones a
container will import from the image.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from interlock.core.base.errors import InterlockError, PipelineDefinitionError
from interlock.core.model.refs import module_name_for

if TYPE_CHECKING:
    from interlock.core.dsl.pipeline import Pipeline






_loading: list[str] = []  # the targets `interlock run/compile/graph` is importing right now


def loading() -> str | None:
    """The file or module the CLI is importing, while it imports it; else None."""
    return _loading[-1] if _loading else None


def import_target(module_or_file: str) -> ModuleType:
    _loading.append(module_or_file)
    try:
        return _import_target(module_or_file)
    finally:
        _loading.pop()


def _import_target(module_or_file: str) -> ModuleType:
    if module_or_file.endswith(".py") or "/" in module_or_file:
        path = Path(module_or_file)
        if not path.exists():
            raise PipelineDefinitionError(f"no such file: {module_or_file}")
        name, root = module_name_for(path)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        return importlib.import_module(name)
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # `interlock run mypkg.pipelines` from a project checkout
    return importlib.import_module(module_or_file)


def _innermost_frame(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename}, line {tb.tb_lineno}" if tb is not None else ""


def load_pipeline(target: str) -> Pipeline:
    """Load ``FILE_OR_MODULE[:PIPELINE]``; without a name, the module's only pipeline."""
    from interlock.core.dsl.pipeline import Pipeline

    module_part, _, attr = target.partition(":")
    if ":" not in target and target.count(":") == 0 and "/" not in target and not target.endswith(".py"):
        module_part, attr = target, ""
    if not module_part:
        raise PipelineDefinitionError(
            f"no file or module in {target!r}", hint="name one: path/to/file.py:PIPELINE or package.module:PIPELINE"
        )
    try:
        module = import_target(module_part)
    except ImportError as exc:
        raise PipelineDefinitionError(f"cannot import {module_part!r}: {exc}") from exc
    except SyntaxError as exc:
        raise PipelineDefinitionError(
            f"syntax error in {exc.filename or module_part}, line {exc.lineno}: {exc.msg}"
        ) from exc
    except InterlockError:
        raise  # a step or pipeline the module declares is wrong: that error says where
    except Exception as exc:  # noqa: BLE001 - the module's own code failed while importing
        where = _innermost_frame(exc)
        raise PipelineDefinitionError(
            f"importing {module_part!r} raised {type(exc).__name__}: {exc}" + (f" ({where})" if where else "")
        ) from exc
    if attr:
        obj = getattr(module, attr, None)
        if not isinstance(obj, Pipeline):
            raise PipelineDefinitionError(f"{module.__name__}:{attr} is not an @il.pipeline")
        return obj
    found = {k: v for k, v in vars(module).items() if isinstance(v, Pipeline) and v.fn.__module__ == module.__name__}
    if len(found) != 1:
        names = ", ".join(sorted(found)) or "none"
        raise PipelineDefinitionError(
            f"{module.__name__} defines {len(found)} pipelines ({names}); name one as {module_part}:NAME"
        )
    return next(iter(found.values()))
