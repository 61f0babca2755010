"""Create the separate ml-metadata virtualenv (``interlock lineage --setup``).

ml-metadata 1.17.1 pins protobuf<5, which cannot share an environment with kfp 2.17, so it
gets its own venv; the LineageStore worker runs there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .client import default_env_dir, venv_python
from .errors import MlmdUnavailable

MLMD_REQUIREMENT = "ml-metadata==1.17.1"


def setup_env(
    path: str | os.PathLike[str] | None = None,
    *,
    base_python: str | None = None,
    pip_args: list[str] | None = None,
) -> str:
    """Create (or reuse) a venv at ``path`` with ml-metadata; return its python's path.

    ``path`` defaults to ``$INTERLOCK_HOME/mlmd-venv`` (``~/.cache/interlock/mlmd-venv``).
    ``base_python`` makes the venv (default: this interpreter; ml-metadata 1.17.1 ships
    wheels for CPython 3.9-3.11). ``pip_args`` go to ``pip install`` (e.g. an index URL).
    Idempotent: an env that already imports ml_metadata is left as it is.
    """
    env = Path(path).expanduser() if path is not None else default_env_dir()
    python = venv_python(env)
    if python.exists() and _imports_mlmd(python):
        return str(python)
    env.parent.mkdir(parents=True, exist_ok=True)
    _run([base_python or sys.executable, "-m", "venv", str(env)], f"create the venv {env}")
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            MLMD_REQUIREMENT,
            *(pip_args or []),
        ],
        f"pip-install {MLMD_REQUIREMENT} into {env}",
    )
    if not _imports_mlmd(python):
        raise MlmdUnavailable(f"{python} still cannot import ml_metadata after install")
    return str(python)


def _imports_mlmd(python: Path) -> bool:
    probe = subprocess.run(
        [str(python), "-I", "-c", "import ml_metadata.metadata_store"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def _run(cmd: list[str], what: str) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise MlmdUnavailable(f"cannot {what}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise MlmdUnavailable(
            f"cannot {what} (exit {done.returncode}):\n{tail}",
            hint="ml-metadata 1.17.1 has wheels for CPython 3.9-3.11 (Linux x86_64, macOS); "
            "pass base_python= a 3.11 interpreter, or pip_args= for a private index",
        )
