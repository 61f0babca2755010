"""``import interlock`` stays light: none of the heavy libraries load, in a fresh process,
even after building a spec, running a small pipeline locally and loading the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("flytekit", "kfp", "airflow", "torch", "mlflow", "boto3", "pandas")

PIPELINE = """
import interlock as il

@il.step(cache=il.Cache(), resources=il.Resources(gpu=1, accelerator="nvidia-h200"), retry=il.Retry(transient=1))
def double(x: int) -> int:
    return 2 * x

@il.step
def positive(x: int) -> bool:
    return x > 0

@il.pipeline
def demo(x: int = 2):
    d = double(x=x)
    with il.when(positive(x=d)):
        double(x=d)
    return d
"""

REPORT = """
import json, sys
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1].split(",")))))
"""

SCENARIOS = {
    "import": "import interlock\n",
    "spec": PIPELINE + "assert il.spec(demo).dumps()\n",
    "local-run": PIPELINE + "import sys\nassert il.run(demo, backend='local', workdir=sys.argv[2]).outputs == {'o0': 4}\n",
    "cli": "import interlock.core.cli.main, interlock.core.report.render, interlock.adapters.local.backend\n",
}


def heavy_modules_after(code: str, tmp_path: Path, watch: tuple[str, ...] = HEAVY) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + REPORT, ",".join(watch), str(tmp_path / "wd")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_heavy_library_is_imported(scenario: str, tmp_path: Path) -> None:
    assert heavy_modules_after(SCENARIOS[scenario], tmp_path) == []


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    # The probe itself must be able to fail: a watched module that was imported shows up
    # (sqlite3 stands in for a heavy library so that this runs without any installed).
    assert heavy_modules_after("import interlock, sqlite3\n", tmp_path, (*HEAVY, "sqlite3")) == ["sqlite3"]
