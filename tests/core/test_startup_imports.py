"""The verbs a person types often answer without importing flytekit, kfp, torch or pandas:
`interlock backends` (capabilities are data), `interlock --help`, `interlock graph`.

Each verb runs in a fresh interpreter; what it imported is read from ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HEAVY = ("flytekit", "kfp", "torch", "pandas", "mlflow", "airflow")

PIPELINE = textwrap.dedent("""
    import interlock as il

    @il.step
    def double(x: int) -> int:
        return 2 * x

    @il.pipeline
    def demo(x: int = 2):
        return double(x=double(x=x))
""")

PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from interlock.core.cli.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(sys.argv[2:])
        except SystemExit as exc:  # --help exits 0
            code = exc.code
    heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1].split(",")))
    print(json.dumps({"code": code, "heavy": heavy, "out": out.getvalue()}))
""")


def run_verb(argv: list[str], tmp_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(HEAVY), *argv],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_backends_lists_every_adapter_without_importing_it(tmp_path: Path) -> None:
    seen = run_verb(["backends", "--json"], tmp_path)
    assert seen["code"] == 0 and seen["heavy"] == []
    rows = {row["backend"]: row for row in json.loads(seen["out"])}
    for name in ("flyte", "flyte-local", "kfp", "kfp-local"):
        if name.split("-")[0] == "flyte" and "error" in rows.get(name, {}):
            continue  # a core-only install: the adapter says it is not available
        assert "features" in rows[name], rows.get(name)
    if "features" in rows.get("flyte-local", {}):  # flytekit installed: the table came from data
        assert rows["flyte-local"]["run_options"] == ["spawn"]


def test_help_imports_no_backend(tmp_path: Path) -> None:
    seen = run_verb(["--help"], tmp_path)
    assert seen["code"] == 0 and "backends" in seen["out"] and seen["heavy"] == []


def test_graph_imports_no_backend(tmp_path: Path) -> None:
    (tmp_path / "demo_startup.py").write_text(PIPELINE)
    seen = run_verb(["graph", str(tmp_path / "demo_startup.py")], tmp_path)
    assert seen["code"] == 0 and "double-2" in seen["out"] and seen["heavy"] == []


def test_the_probe_sees_an_adapter_import(tmp_path: Path) -> None:
    # The check must be able to fail: a verb that loads flytekit shows up in the list.
    pytest.importorskip("flytekit")
    (tmp_path / "demo_startup.py").write_text(PIPELINE + "import flytekit\n")
    seen = run_verb(["graph", str(tmp_path / "demo_startup.py")], tmp_path)
    assert "flytekit" in seen["heavy"]
