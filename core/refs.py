"""The importable reference of a pipeline defined in a script run as ``python file.py``.

Such a pipeline lives in ``__main__``, a name no container (and no kfp-local task process)
can import. Its file can be: under the dotted name its package layout gives it, the same
name ``interlock run file.py`` imports it by. The script's ``if __name__ == "__main__":``
block does not run on that import, so a task never starts the run again.
"""

from __future__ import annotations

import sys
from pathlib import Path


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
