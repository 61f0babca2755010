"""`interlock run` told to stop, in a real process, on every backend: the same statuses, exit
codes and lines wherever it runs.

- a signal sent to the interlock process alone (``kill``, a supervisor's SIGINT) stops the
  running step: it is recorded STOPPED, the next step never starts, nothing says "failed";
- Ctrl-C (SIGINT to the process group) on a checkpointing step: the step's line and the
  summary name the same checkpoint;
- SIGTERM to interlock while a distributed step runs is a stop, not a preemption: no
  relaunch under ``Retry(preempted=2)``, no PREEMPTED (a reclaim on a cluster still is one:
  tests/kfp_backend/test_kfp_distributed.py);
- a child process a step leaves running does not hold the run (kfp-local used to wait for it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from backends import runnable_backends

MODULE = "conformance.stop_pipelines"
CODES = {signal.SIGTERM: 143, signal.SIGINT: 130}


class Run:
    def __init__(self, tmp_path: Path, backend: str, pipeline: str, *, session: bool = False):
        self.tmp, self.ready = tmp_path, tmp_path / "ready"
        self.out, self.err = (tmp_path / "stdout").open("w"), (tmp_path / "stderr").open("w")
        # Files, not pipes: a child a step leaves running would hold a pipe open.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "interlock.core.cli.main", "run", f"{MODULE}:{pipeline}", "--backend", backend,
             "--workdir", str(tmp_path / "wd"), "--run-id", "s1"],
            cwd=tmp_path, env={**os.environ, "STOP_READY": str(self.ready)}, stdout=self.out, stderr=self.err,
            start_new_session=session,
        )

    def wait_ready(self, lines: int = 1, timeout: float = 180) -> None:
        end = time.monotonic() + timeout
        while not self.ready.exists() or len(self.ready.read_text().splitlines()) < lines:
            if self.proc.poll() is not None or time.monotonic() > end:
                self.finish(5)
                pytest.fail(f"the step never started (rc {self.proc.returncode}):\n{self.stderr}")
            time.sleep(0.05)
        time.sleep(0.3)  # inside the step's sleep, its handlers installed

    def finish(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.out.close()
            self.err.close()

    @property
    def stderr(self) -> str:
        return (self.tmp / "stderr").read_text()

    def steps(self) -> dict[str, dict]:
        receipt = json.loads((self.tmp / "wd" / "runs" / "s1" / "state" / "receipt.json").read_text())
        return {s["node"]: s for s in receipt["steps"]}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
@pytest.mark.parametrize("backend", runnable_backends())
def test_a_signal_to_interlock_alone_stops_the_running_step(tmp_path: Path, backend: str, signum: int) -> None:
    run = Run(tmp_path, backend, "stop_waiting")
    run.wait_ready()
    t0 = time.monotonic()
    os.kill(run.proc.pid, signum)  # the interlock process alone, as a supervisor sends it
    assert run.finish() == CODES[signum], run.stderr
    assert time.monotonic() - t0 < 30  # the step did not sleep its 60 s out
    err, name = run.stderr, signal.Signals(signum).name
    assert run.ready.read_text() == "attempt\n"  # a stop is not retried
    steps = run.steps()
    assert [steps[n]["status"] for n in ("prep", "wait_here", "after")] == ["succeeded", "stopped", "not-run"]
    assert [a["status"] for a in steps["wait_here"]["attempts"]] == ["stopped"]
    assert f"wait_here                stopped  stopped by {name} (no checkpoint taken)" in err
    assert f"step 'wait_here' stopped by {name} (no checkpoint taken)" in err.split("STOPPED after", 1)[1]
    assert " failed " not in err and "outside any step" not in err and "after                    started" not in err


@pytest.mark.parametrize("backend", runnable_backends("checkpoint"))
def test_ctrl_c_step_line_and_summary_name_the_same_checkpoint(tmp_path: Path, backend: str) -> None:
    run = Run(tmp_path, backend, "stop_training", session=True)
    run.wait_ready()
    os.killpg(run.proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
    assert run.finish() == 130, run.stderr
    train = run.steps()["train"]
    assert train["status"] == "stopped"
    saved = f"stopped by SIGINT (checkpoint {train['facts']['checkpoint_at_stop']} committed)"
    line, summary = run.stderr.split("STOPPED after", 1)
    assert f"train                    stopped  {saved}" in line
    assert f"step 'train' {saved}" in summary
    assert "no checkpoint taken" not in run.stderr and " failed " not in run.stderr


@pytest.mark.parametrize("backend", runnable_backends("distributed"))
def test_sigterm_to_interlock_stops_a_distributed_step_without_a_relaunch(tmp_path: Path, backend: str) -> None:
    pytest.importorskip("torch")
    run = Run(tmp_path, backend, "stop_distributed")
    run.wait_ready(lines=2, timeout=240)  # both ranks inside the step
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.finish() == 143, run.stderr
    err = run.stderr
    assert sorted(run.ready.read_text().splitlines()) == ["rank 0", "rank 1"]  # one launch, no relaunch
    assert "PREEMPTED" not in err and "relaunch" not in err and "reclaimed" not in err
    steps = run.steps()
    assert (steps["spin"]["status"], steps["after"]["status"]) == ("stopped", "not-run")
    assert [a["status"] for a in steps["spin"]["attempts"]] == ["stopped"]
    assert "spin                     stopped  stopped by SIGTERM" in err
    assert "step 'spin' stopped by SIGTERM" in err.split("STOPPED after", 1)[1]


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_child_left_running_by_a_step_does_not_hold_the_run(tmp_path: Path, backend: str) -> None:
    run = Run(tmp_path, backend, "leftover_child")
    t0 = time.monotonic()
    try:
        assert run.finish(timeout=50) == 0, run.stderr
        assert time.monotonic() - t0 < 30  # the child sleeps 60 s
        assert "left a child running" in run.stderr + (tmp_path / "stdout").read_text()
        assert {s["status"] for s in run.steps().values()} == {"succeeded"}
    finally:
        for line in run.ready.read_text().splitlines() if run.ready.exists() else []:
            if line.startswith("child "):
                try:
                    os.kill(int(line.split()[1]), signal.SIGKILL)
                except ProcessLookupError:
                    pass
