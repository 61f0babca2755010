"""`interlock run` in a real process: SIGTERM and Ctrl-C stop the run with a receipt and exit
143 / 130 (no retry), a checkpoint is committed first, and a failing step's report holds the
user's file and line once, with the hint once, on every local backend.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from backends import other_backends, runnable_backends

PIPELINE = '''
import os
import time
from pathlib import Path

import interlock as il

READY = Path(os.environ["STOP_TEST_READY"])


@il.step
def prep(x: int) -> int:
    return x + 1


@il.step(retry=il.Retry(transient=3, preempted=10), interruptible=True)
def sleepy(x: int) -> int:
    with open(READY, "a") as f:
        f.write("attempt\\n")
    time.sleep(60)
    return x


@il.step(checkpoint=il.CheckpointPolicy(every="1h", keep=2))
def train(x: int, ctx: il.StepContext) -> int:
    start = (ctx.checkpoint.load() or {"epoch": 0})["epoch"]
    READY.write_text("training\\n")
    for epoch in range(start, 100_000):
        if ctx.checkpoint_due():  # True once the run is told to stop
            ctx.checkpoint.save({"epoch": epoch})
        time.sleep(0.01)
    return x


@il.step
def after(x: int) -> int:
    return x


@il.pipeline(name="stop-me")
def stop_me(x: int = 1):
    return after(x=sleepy(x=prep(x=x)))


@il.pipeline(name="stop-me-ckpt")
def stop_me_ckpt(x: int = 1):
    return after(x=train(x=prep(x=x)))
'''

BUG = '''
import interlock as il


@il.step
def prep(x: int) -> dict:
    return {"a": x}


@il.step
def lookup(d: dict) -> int:
    return d["missing"]


@il.pipeline(name="bug")
def bug(x: int = 1):
    return lookup(d=prep(x=x))
'''


def exe() -> list[str]:
    return [sys.executable, "-m", "interlock.core.cli.main"]


def start(tmp_path: Path, target: str, ready: Path, backend: str = "local") -> subprocess.Popen[str]:
    (tmp_path / "stop_pipe.py").write_text(textwrap.dedent(PIPELINE))
    env = {**__import__("os").environ, "STOP_TEST_READY": str(ready)}
    return subprocess.Popen(
        [*exe(), "run", f"stop_pipe.py:{target}", "--backend", backend, "--workdir", str(tmp_path / "wd"),
         "--run-id", "stopped-1"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > end:
            out, err = proc.communicate(timeout=5) if proc.poll() is not None else ("", "")
            pytest.fail(f"the step never started (rc {proc.poll()}):\n{out}\n{err}")
        time.sleep(0.05)


def receipt(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "wd" / "runs" / "stopped-1" / "state" / "receipt.json").read_text())


def _needs(backend: str) -> None:
    """The CLI runs in a subprocess: skip here (core-only env) when the backend's extra is missing."""
    module = {"flyte-local": "flytekit", "kfp-local": "kfp.local"}.get(backend)
    if module:
        pytest.importorskip(module, reason=f"{backend} needs the {module.split('.')[0]} extra")


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["sigterm", "sigint"])
def test_a_signal_stops_interlock_run_with_a_receipt(tmp_path: Path, signum: int, code: int) -> None:
    ready = tmp_path / "ready"
    proc = start(tmp_path, "stop_me", ready)
    wait_for(ready, proc)
    t0 = time.monotonic()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == code, err
    assert ready.read_text() == "attempt\n"  # one attempt: a stop is not retried
    name = signal.Signals(signum).name
    assert f"step 'sleepy' stopped by {name}" in err
    assert "resume with: interlock run stop_pipe.py:stop_me --backend local --resume stopped-1" in err
    rec = receipt(tmp_path)
    assert rec["status"] == "stopped"
    steps = {s["node"]: s for s in rec["steps"]}
    assert [steps[n]["status"] for n in ("prep", "sleepy", "after")] == ["succeeded", "stopped", "not-run"]
    assert [a["status"] for a in steps["sleepy"]["attempts"]] == ["stopped"]
    assert steps["sleepy"]["facts"]["stopped_by"] == name
    assert f"receipt: {tmp_path / 'wd' / 'runs' / 'stopped-1' / 'state' / 'receipt.json'}" in err


@pytest.mark.parametrize("backend", other_backends())
def test_sigterm_to_interlock_run_stops_the_running_task(tmp_path: Path, backend: str) -> None:
    _needs(backend)
    """kfp-local runs the step in a subprocess: a SIGTERM sent to `interlock run` alone
    (`kill`, `timeout`) is passed on to it, and kfp's retry of the stopped task is refused."""
    ready = tmp_path / "ready"
    proc = start(tmp_path, "stop_me", ready, backend)
    wait_for(ready, proc, timeout=120)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    assert ready.read_text() == "attempt\n"
    steps = {s["node"]: s for s in receipt(tmp_path)["steps"]}
    assert [steps[n]["status"] for n in ("prep", "sleepy", "after")] == ["succeeded", "stopped", "not-run"]
    assert "resume with: interlock run" in err


def test_a_stopped_step_with_a_checkpoint_policy_commits_a_checkpoint_first(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = start(tmp_path, "stop_me_ckpt", ready)
    wait_for(ready, proc)
    time.sleep(0.3)  # a few epochs in
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "checkpoint" in err and "committed" in err
    step = {s["node"]: s for s in receipt(tmp_path)["steps"]}["train"]
    assert step["status"] == "stopped"
    ckpt = step["facts"]["checkpoint_at_stop"]
    ckpt_dir = tmp_path / "wd" / "runs" / "stopped-1" / "state" / "checkpoints"
    manifests = [p for p in ckpt_dir.rglob("*") if ckpt in p.name]
    assert manifests, sorted(str(p) for p in ckpt_dir.rglob("*"))


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_bug_in_a_step_reports_its_file_and_line_once(tmp_path: Path, backend: str) -> None:
    _needs(backend)
    (tmp_path / "bug_pipe.py").write_text(textwrap.dedent(BUG))
    line = textwrap.dedent(BUG).splitlines().index('    return d["missing"]') + 1
    where = f'{tmp_path / "bug_pipe.py"}", line {line}, in lookup'
    proc = subprocess.run(
        [*exe(), "run", "bug_pipe.py:bug", "--backend", backend, "--workdir", str(tmp_path / "wd"), "--run-id", "bug-1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    rec = json.loads((tmp_path / "wd" / "runs" / "bug-1" / "state" / "receipt.json").read_text())
    step = {s["node"]: s for s in rec["steps"]}["lookup"]
    tb = step["attempts"][-1]["failure"]["traceback"]
    assert where in tb and "KeyError: 'missing'" in tb
    report = proc.stderr.split("\nFAILED after", 1)[1]  # what the CLI prints at the end
    assert report.count("hint: ") == 1 and report.count("receipt: ") == 1
    assert report.count(where) == 1 and "step 'lookup' failed (FATAL)" in report
    # The hint once in the whole output, whatever the backend logged before (kfp-local streams
    # each task's log to stdout).
    assert (proc.stdout + proc.stderr).count("an unknown error is treated as FATAL") == 1, proc.stdout + proc.stderr

    debug = subprocess.run(
        [*exe(), "run", "bug_pipe.py:bug", "--backend", backend, "--workdir", str(tmp_path / "wd"), "--debug"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert debug.returncode == 1 and where in debug.stderr
    if backend == "local":  # the exception is in this process: the untrimmed stack too
        assert "full traceback:" in debug.stderr and "core/run/runtime.py" in debug.stderr
