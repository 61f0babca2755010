"""The distribution installs as `interlock` only, from a built wheel, into a bare venv."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: build with the installed setuptools, no download.
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True, text=True,
    )
    (whl,) = out.glob("interlock-*.whl")
    return whl


def test_wheel_installs_only_the_interlock_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.startswith("interlock-")}
    assert top == {"interlock"}, f"unexpected top-level names in the wheel: {sorted(top)}"
    for module in ("interlock/core/runtime.py", "interlock/adapters/local/backend.py", "interlock/plugins/mlmd/worker.py"):
        assert module in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[interlock.backends]" in text and "local = interlock.adapters.local:LocalBackend" in text


def test_wheel_runs_a_pipeline_in_a_bare_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    # The core has no dependencies: the wheel alone must install with no index at all.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)], check=True)
    script = textwrap.dedent(
        """
        import importlib.util, sys
        import interlock as il
        assert importlib.util.find_spec("core") is None, "a generic top-level `core` got installed"

        @il.step
        def double(x: int) -> int:
            return 2 * x

        @il.pipeline
        def demo(x: int = 2):
            return double(x=x)

        result = il.run(demo, backend="local", workdir=sys.argv[1], x=21)
        print(result.outputs["o0"])
        """
    )
    (tmp_path / "demo_wheel.py").write_text(script)
    # A bare environment: the suite's PYTHONPATH (tests/, where tests/core/ would pass for a
    # namespace package named `core`) must not leak into the check.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run(
        [str(py), "demo_wheel.py", str(tmp_path / "work")], cwd=tmp_path, capture_output=True, text=True,
        check=True, env=env,
    )
    assert proc.stdout.strip() == "42"
