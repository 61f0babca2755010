"""``import interlock`` loads no module of the core until a name is used (PEP 562), and every
public name still resolves to the same object its core module defines.

Every KFP task process imports the package first (its component calls
``interlock.adapters.kfp.entry``): what ``import interlock`` loads is paid once per task.
Each check that depends on what is loaded runs in a fresh interpreter.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import interlock

INIT = Path(interlock.__file__)

LOADED = """
import json, sys
{code}
print(json.dumps(sorted(m for m in sys.modules if m == "interlock" or m.startswith("interlock."))))
"""


def loaded_after(code: str, tmp_path: Path) -> list[str]:
    """The interlock modules in sys.modules after ``code`` runs in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", LOADED.format(code=code)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def declared_for_type_checkers() -> dict[str, str]:
    """name -> module, from the ``if TYPE_CHECKING:`` imports of interlock/__init__.py."""
    tree = ast.parse(INIT.read_text())
    blocks = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    assert len(blocks) == 1, "interlock/__init__.py declares its names in one `if TYPE_CHECKING:` block"
    found: dict[str, str] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        for alias in node.names:
            assert alias.asname is None, ast.unparse(node)
            found[alias.name] = node.module
    return found


def test_import_loads_no_core_module(tmp_path: Path) -> None:
    # Exactly the package itself: not interlock.core, not one of its modules.
    assert loaded_after("import interlock", tmp_path) == ["interlock"]


def test_a_name_loads_only_its_module(tmp_path: Path) -> None:
    # status.py imports nothing of interlock: using il.Status loads it and its packages alone.
    assert loaded_after("import interlock\ninterlock.Status.SUCCEEDED", tmp_path) == [
        "interlock", "interlock.core", "interlock.core.base", "interlock.core.base.status"]


def test_the_probe_sees_an_eager_import(tmp_path: Path) -> None:
    # The probe can fail: a name used loads its module, which shows up.
    assert "interlock.core.backend.api" in loaded_after("import interlock\ninterlock.run", tmp_path)


def test_type_checkers_see_exactly_the_public_names() -> None:
    assert sorted(declared_for_type_checkers()) == sorted(interlock.__all__)
    assert len(set(interlock.__all__)) == len(interlock.__all__)


@pytest.mark.parametrize("name", sorted(interlock.__all__))
def test_every_public_name_resolves_to_its_modules_object(name: str) -> None:
    module = declared_for_type_checkers()[name]
    expected = getattr(importlib.import_module(module), name)
    assert getattr(interlock, name) is expected
    assert getattr(interlock, name) is expected  # the second lookup (a plain module attribute) too
    assert name in dir(interlock)


def test_star_import_binds_every_public_name(tmp_path: Path) -> None:
    code = (
        "ns = {}\nexec('from interlock import *', ns)\n"
        "import interlock\n"
        "assert sorted(k for k in ns if k != '__builtins__') == sorted(interlock.__all__), sorted(ns)\n"
        "assert all(ns[k] is getattr(interlock, k) for k in interlock.__all__)\n"
    )
    assert "interlock.core.backend.api" in loaded_after(code, tmp_path)


def test_unknown_names_fail_as_for_any_module() -> None:
    with pytest.raises(AttributeError, match=r"^module 'interlock' has no attribute 'no_such_name'$"):
        interlock.no_such_name  # noqa: B018
    assert not hasattr(interlock, "no_such_name")
    with pytest.raises(ImportError, match=r"cannot import name 'no_such_name' from 'interlock'"):
        from interlock import no_such_name  # noqa: F401


def test_subpackages_and_version_still_import(tmp_path: Path) -> None:
    # `from interlock import core` goes through __getattr__ (AttributeError) and then imports it.
    code = "from interlock import core, adapters\nimport interlock\nassert interlock.__version__\n"
    assert loaded_after(code, tmp_path) == ["interlock", "interlock.adapters", "interlock.core"]
