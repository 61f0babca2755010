"""Names that moved to a module loaded on first use, still served by the module they left.

A KFP task process imports the modules its step needs; classes only a failure, a pipeline
graph or an opt-in policy needs live in modules of their own so that such a process never
creates them. Their old module keeps answering for them through PEP 562's module
``__getattr__``: ``from interlock.core.spec import PipelineSpec`` works as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def served_from(module: str, moved: dict[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` (its ``__name__``): each name in ``moved``
    (sibling module -> the names it now defines) is imported on first use and kept in
    ``module``, so later lookups are plain attribute reads."""
    package = module.rpartition(".")[0]
    where = {name: sibling for sibling, names in moved.items() for name in names}

    def __getattr__(name: str) -> Any:
        sibling = where.get(name)
        if sibling is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{sibling}"), name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__
