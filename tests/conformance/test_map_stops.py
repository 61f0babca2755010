"""A stopped il.map, in a real `interlock run` process: SIGTERM while items run stops the map
(never a success with None for the missing items), on the main thread (a step with a timeout
runs its items there) and on item threads (`concurrency=4`); the run stops with a receipt and
exit 143, the finally step runs and sees the stop, and the same on every local backend."""

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
from interlock.core.dsl.fanout import map as il_map

READY = Path(os.environ["STOP_TEST_READY"])


@il.step(timeout="1h")
def nap(x: int) -> int:
    with open(READY, "a") as f:
        f.write(f"{x}\\n")
    time.sleep(x)
    return x


@il.step
def nap_threaded(x: int) -> int:
    with open(READY, "a") as f:
        f.write(f"{x}\\n")
    time.sleep(x)
    return x


@il.step
def total(parts: list[int]) -> int:
    return sum(parts)


@il.step
def final(status: il.RunStatus) -> str:
    Path(str(READY) + ".final").write_text(f"{status.status} {status.failed_steps}")
    return status.status


@il.step
def slow_third(x: int) -> int:
    with open(str(READY) + ".runs", "a") as f:
        f.write(f"{x}\\n")
    if x == 3 and not Path(str(READY) + ".resumed").exists():
        READY.write_text("third\\n")
        time.sleep(60)
    return x * 10


@il.pipeline(name="kill-map")
def kill_map(xs: list[int] = [1, 2, 3, 4]):
    return total(parts=il_map(slow_third, over=xs, concurrency=1))


@il.pipeline(name="stop-map")
def stop_map(xs: list[int] = [3, 3, 3, 3]):
    return total(parts=il_map(nap, over=xs))


@il.pipeline(name="stop-map-threads")
def stop_map_threads(xs: list[int] = [3, 3, 3, 3]):
    il.finally_(final)
    return total(parts=il_map(nap_threaded, over=xs, concurrency=4))
'''


def _needs(backend: str) -> None:
    module = {"flyte-local": "flytekit", "kfp-local": "kfp.local"}.get(backend)
    if module:
        pytest.importorskip(module, reason=f"{backend} needs the {module.split('.')[0]} extra")


def _stop(tmp_path: Path, target: str, backend: str) -> tuple[int, str, dict]:
    (tmp_path / "stop_map.py").write_text(textwrap.dedent(PIPELINE))
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.core.cli.main", "run", f"stop_map.py:{target}", "--backend", backend,
         "--workdir", str(tmp_path / "wd"), "--run-id", "m1"],
        cwd=tmp_path, env={**os.environ, "STOP_TEST_READY": str(ready)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    end = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > end:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"no item started (rc {proc.poll()}):\n{out}\n{err}")
        time.sleep(0.05)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    receipt = json.loads((tmp_path / "wd" / "runs" / "m1" / "state" / "receipt.json").read_text())
    return proc.returncode, out + err, receipt


def _steps(receipt: dict) -> dict[str, dict]:
    return {s["node"]: s for s in receipt["steps"]}


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_stopped_map_is_not_a_success(tmp_path: Path, backend: str) -> None:
    # local exited 0 "succeeded": the items after the stopped one ran, and `total` got None for it.
    _needs(backend)
    code, output, receipt = _stop(tmp_path, "stop_map", backend)
    assert code == 143, output
    assert "step 'nap' stopped by SIGTERM" in output
    assert receipt["status"] == "stopped"
    steps = _steps(receipt)
    assert (steps["nap"]["status"], steps["total"]["status"]) == ("stopped", "not-run")
    entries = steps["nap"]["facts"]["map"]["entries"]
    assert len(entries) == 4 and entries[0]["status"] == "stopped"
    assert "succeeded" not in {e["status"] for e in entries}  # no item ran on after the stop


@pytest.mark.parametrize("backend", runnable_backends())
def test_sigterm_stops_a_threaded_map_and_the_finally_step_is_not_blamed(tmp_path: Path, backend: str) -> None:
    # local ran every item to its end and wrote no receipt ("outside any step"); flyte-local
    # said the map succeeded; kfp-local blamed the finally step that never started.
    _needs(backend)
    t0 = time.monotonic()
    code, output, receipt = _stop(tmp_path, "stop_map_threads", backend)
    assert code == 143, output
    assert "step 'nap_threaded' stopped by SIGTERM" in output
    assert "outside any step" not in output
    assert receipt["status"] == "stopped"
    steps = _steps(receipt)
    assert (steps["nap_threaded"]["status"], steps["total"]["status"]) == ("stopped", "not-run")
    entries = steps["nap_threaded"]["facts"]["map"]["entries"]
    assert len(entries) == 4 and "succeeded" not in {e["status"] for e in entries}
    assert time.monotonic() - t0 < 60
    if backend == "kfp-local":  # kfp.local stops the whole run on a stop: its exit task never starts
        assert steps["final"]["status"] in ("stopped", "not-run")
    else:  # the finally step runs and sees the stop
        assert steps["final"]["status"] == "succeeded"
        assert (tmp_path / "ready.final").read_text() == "stopped ['nap_threaded']"


def test_a_killed_map_resumed_keeps_its_finished_items(tmp_path: Path) -> None:
    """SIGKILL mid-map, then --resume: the items that succeeded are not run again (local re-ran
    every item); a resume keeps finished items as it keeps finished steps (docs/resuming.md)."""
    (tmp_path / "stop_map.py").write_text(textwrap.dedent(PIPELINE))
    ready = tmp_path / "ready"
    env = {**os.environ, "STOP_TEST_READY": str(ready)}
    cmd = [sys.executable, "-m", "interlock.core.cli.main", "run", "stop_map.py:kill_map", "--backend", "local",
           "--workdir", str(tmp_path / "wd")]
    proc = subprocess.Popen([*cmd, "--run-id", "k1"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not ready.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    proc.kill()
    out, err = proc.communicate(timeout=30)
    runs = Path(str(ready) + ".runs")
    assert runs.exists(), out + err
    assert runs.read_text().split() == ["1", "2", "3"]
    runs.write_text("")
    Path(str(ready) + ".resumed").write_text("")
    done = subprocess.run([*cmd, "--resume", "k1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert runs.read_text().split() == ["3", "4"]  # items 1 and 2 finished before the kill
    assert "slow_third[0]" in done.stderr and "done in an earlier attempt of this run" in done.stderr
    steps = _steps(json.loads((tmp_path / "wd" / "runs" / "k1" / "state" / "receipt.json").read_text()))
    assert steps["total"]["status"] == "succeeded"
    assert [e["status"] for e in steps["slow_third"]["facts"]["map"]["entries"]] == ["succeeded"] * 4
