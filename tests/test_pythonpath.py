"""Nothing on pytest's pythonpath passes for a library: a folder ``tests/kfp`` would import as
a namespace package ``kfp`` wherever the real one is missing (the core-only venv), and
``tests/flyte`` would shadow the Flyte 2 SDK (import name ``flyte``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("kfp", "flyte", "flytekit", "airflow", "mlflow", "torch", "pandas", "hera", "boto3", "mlmd")


def test_no_folder_on_the_test_pythonpath_is_named_like_a_library() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    entries = config["tool"]["pytest"]["ini_options"]["pythonpath"]
    clashes = [f"{entry}/{name}" for entry in entries for name in LIBRARIES
               if (ROOT / entry / name).is_dir() or (ROOT / entry / f"{name}.py").is_file()]
    assert clashes == []
