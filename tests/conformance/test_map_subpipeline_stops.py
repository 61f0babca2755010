"""A stopped il.map over a sub-pipeline, in a real `interlock run` process: SIGTERM while the
items' bodies run on threads stops the call (never a success with None for the stopped items),
the run stops with a receipt and exit 143, on every backend that runs the map (issue 24)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from backends import runnable_backends

PIPELINE = '''
import os
import time
from pathlib import Path

import interlock as il

READY = Path(os.environ["STOP_TEST_READY"])


@il.step
def nap(x: int) -> int:
    with open(READY, "a") as f:
        f.write(f"{x}\\n")
    time.sleep(x)
    return x


@il.step
def after_nap(x: int) -> int:
    return x


@il.step
def total(parts: list[int]) -> int:
    return sum(parts)


@il.pipeline(name="napper")
def napper(x: int) -> int:
    return after_nap(x=nap(x=x))


@il.pipeline(name="stop-submap")
def stop_submap(xs: list[int] = [5] * int(os.environ["STOP_TEST_ITEMS"])):
    return total(parts=il.map(napper, over=xs, concurrency=4))
'''


# kfp.local runs at most two iterations of a ParallelFor at once (its ParallelExecutor's
# conservative_max), flyte-local one (flytekit's local execution of the call's dynamic runs the
# items in order): every item must be running when the signal comes.
AT_ONCE = {"kfp-local": 2, "flyte-local": 1}


@pytest.mark.parametrize("backend", runnable_backends("map.subpipeline"))
def test_sigterm_stops_a_mapped_sub_pipeline_on_item_threads(tmp_path: Path, backend: str) -> None:
    (tmp_path / "stop_submap.py").write_text(textwrap.dedent(PIPELINE))
    n = AT_ONCE.get(backend, 4)
    ready = tmp_path / "ready"
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.core.cli.main", "run", "stop_submap.py:stop_submap", "--backend", backend,
         "--workdir", str(tmp_path / "wd"), "--run-id", "s1"],
        cwd=tmp_path, env={**os.environ, "STOP_TEST_READY": str(ready), "STOP_TEST_ITEMS": str(n)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    end = time.monotonic() + 120
    while not ready.exists() or len(ready.read_text().split()) < n:
        if proc.poll() is not None or time.monotonic() > end:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"the items did not start (rc {proc.poll()}):\n{out}\n{err}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    receipt = json.loads((tmp_path / "wd" / "runs" / "s1" / "state" / "receipt.json").read_text())
    assert receipt["status"] == "stopped"
    steps = {s["node"]: s for s in receipt["steps"]}
    assert steps["napper.nap"]["status"] == "stopped"
    assert steps["total"]["status"] == "not-run"
    assert "napper.after_nap" not in steps or steps["napper.after_nap"]["status"] != "succeeded"
    entries = steps["napper.nap"]["facts"]["map"]["entries"]
    assert len(entries) == n and "succeeded" not in {e["status"] for e in entries}
    assert time.monotonic() - t0 < 60  # stopped, not run to the end of every nap
