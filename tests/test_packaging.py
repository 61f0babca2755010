"""The distribution installs as `interlock` only, and one `interlock` is found however it runs.

`core/`, `adapters/` and `plugins/` are top-level folders of the checkout that install as
`interlock.core`, `interlock.adapters` and `interlock.plugins`; the package's own
`__init__` lives in `src/interlock`. These tests hold that layout to its promise: from the
repository root and from anywhere else, with an editable install and with the built wheel,
`import interlock` gives the one installed package, each module exists once, and the
folders cannot be imported under a second, top-level name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What a process sees when it imports interlock: printed as JSON by each probe.
PROBE = textwrap.dedent(
    """
    import importlib.util, json, sys
    import interlock
    import interlock.core.base.errors

    def top_level(name):
        try:
            __import__(name)
        except ImportError as exc:
            return "refused" if "interlock." + name in str(exc) else "absent"
        return "imported"

    print(json.dumps({
        "interlock": interlock.__file__,
        "path": list(interlock.__path__),
        "core": interlock.core.__file__,
        "one_step_failed": interlock.StepFailed is interlock.core.base.errors.StepFailed,
        "checkout_folders_as_subpackages": [
            n for n in ("reference_pipelines", "tests", "docs", "benchmarks", "src")
            if importlib.util.find_spec("interlock." + n) is not None
        ],
        "top_level": {n: top_level(n) for n in ("core", "adapters", "plugins")},
        "copies": sorted(m for m in sys.modules if m.split(".")[0] in ("core", "adapters", "plugins")),
    }))
    """
)


def _bare_env() -> dict[str, str]:
    """The suite's PYTHONPATH (test pipelines, helpers) must not leak into these checks."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _probe(python: Path | str, cwd: Path) -> dict:
    proc = subprocess.run([str(python), "-c", PROBE], cwd=cwd, capture_output=True, text=True, env=_bare_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _assert_one_interlock(seen: dict, *, package_dir: Path, core_dir: Path, from_root: bool) -> None:
    assert Path(seen["interlock"]) == package_dir / "__init__.py"
    assert seen["path"] == [str(package_dir)], "no folder may be grafted onto interlock.__path__"
    assert Path(seen["core"]) == core_dir / "__init__.py"
    assert seen["one_step_failed"]
    assert seen["checkout_folders_as_subpackages"] == []
    assert seen["copies"] == []
    # From the root the folders are visible on sys.path, and refuse to load under a second name.
    expected = "refused" if from_root else "absent"
    assert seen["top_level"] == {"core": expected, "adapters": expected, "plugins": expected}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy of what the wheel is made of: setuptools writes build/ and
    # interlock.egg-info next to the sources, and an egg-info left in the checkout (on the
    # tests' sys.path) would shadow the installed entry points once they change.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("src", "core", "adapters", "plugins"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    # --no-isolation: build with the installed setuptools, no download.
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (whl,) = out.glob("interlock-*.whl")
    return whl


def _bare_venv(path: Path) -> Path:
    venv.create(path, with_pip=True)
    return path / "bin" / "python"


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, env=_bare_env())
    return Path(out.stdout.strip())


def test_wheel_installs_only_the_interlock_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.startswith("interlock-")}
    assert top == {"interlock"}, f"unexpected top-level names in the wheel: {sorted(top)}"
    for module in ("interlock/__init__.py", "interlock/core/run/runtime.py", "interlock/adapters/local/backend.py",
                   "interlock/plugins/mlmd/worker.py"):
        assert module in names
    # Every module of core, of every adapter and of every plugin ships (a subpackage left out of
    # pyproject.toml's list would not: adapters/flyte2 nearly did).
    root = Path(__file__).resolve().parents[1]
    shipped = {f"interlock/{p.relative_to(root).as_posix()}" for top in ("core", "adapters", "plugins")
               for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts}
    assert shipped - set(names) == set()
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[interlock.backends]" in text and "local = interlock.adapters.local.backend:LocalBackend" in text


def test_wheel_runs_a_pipeline_in_a_bare_venv(wheel: Path, tmp_path: Path) -> None:
    py = _bare_venv(tmp_path / "venv")
    # The core has no dependencies: the wheel alone must install with no index at all.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)], check=True,
                   env=_bare_env())
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
    proc = subprocess.run(
        [str(py), "demo_wheel.py", str(tmp_path / "work")], cwd=tmp_path, capture_output=True, text=True,
        env=_bare_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "42"


def test_the_wheel_is_the_one_interlock_from_the_root_and_elsewhere(wheel: Path, tmp_path: Path) -> None:
    py = _bare_venv(tmp_path / "venv")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)], check=True,
                   env=_bare_env())
    installed = _site_packages(py) / "interlock"
    for cwd, from_root in ((ROOT, True), (tmp_path, False)):
        _assert_one_interlock(_probe(py, cwd), package_dir=installed, core_dir=installed / "core", from_root=from_root)


def test_an_editable_install_is_the_one_interlock_from_the_root_and_elsewhere(tmp_path: Path) -> None:
    py = _bare_venv(tmp_path / "venv")
    # Build with a copy of this suite's setuptools (the venv's bundled one is too old for
    # pyproject.toml; no download): only that copy, never this suite's site-packages, where
    # pip would find this suite's interlock and uninstall it.
    import importlib.metadata

    import _distutils_hack
    import setuptools

    tools = tmp_path / "build-tools"
    for module in (setuptools, _distutils_hack):
        shutil.copytree(Path(module.__file__).parent, tools / module.__name__)
    metadata = Path(importlib.metadata.distribution("setuptools")._path)  # type: ignore[attr-defined]
    shutil.copytree(metadata, tools / metadata.name)  # its entry points declare the build commands
    subprocess.run([str(py), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True, env=_bare_env())
    borrowed = _site_packages(py) / "borrowed-build-tools.pth"
    borrowed.write_text(f"{tools}\n")
    done = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation", "-e", str(ROOT)],
        capture_output=True, text=True, env=_bare_env(),
    )
    borrowed.unlink()
    assert done.returncode == 0, done.stderr[-3000:]
    for cwd, from_root in ((ROOT, True), (tmp_path, False)):
        _assert_one_interlock(_probe(py, cwd), package_dir=ROOT / "src" / "interlock", core_dir=ROOT / "core",
                              from_root=from_root)


def test_this_suites_interlock_is_the_same_from_the_root_and_elsewhere(tmp_path: Path) -> None:
    """However the suite's environment installed interlock, the root does not shadow it."""
    here, there = _probe(sys.executable, ROOT), _probe(sys.executable, tmp_path)
    assert {k: v for k, v in here.items() if k != "top_level"} == {k: v for k, v in there.items() if k != "top_level"}
    import interlock
    import interlock.core

    package_dir = Path(interlock.__file__).parent
    _assert_one_interlock(here, package_dir=package_dir, core_dir=Path(interlock.core.__file__).parent, from_root=True)
    _assert_one_interlock(there, package_dir=package_dir, core_dir=Path(interlock.core.__file__).parent,
                          from_root=False)
