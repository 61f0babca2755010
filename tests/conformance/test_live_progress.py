"""Live progress: on every local backend, `interlock run` (and il.run) streams each step's own
prints and log records as they happen, prefixed with the step, with a heartbeat that carries
ctx.progress; foreign chatter (kfp's executor log, MLflow's table creation) only with
--verbose; no colour codes into a pipe.

"As they happen" is checked without timing guesses: the step waits for a file that the test
writes only after it has read the step's lines (and a heartbeat) from the pipe.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from backends import runnable_backends

BACKENDS = runnable_backends()

PIPELINE = '''
import os
import sys
import time

import interlock as il


@il.step
def talk(gate: str, ctx: il.StepContext) -> str:
    print("waiting for the gate")
    print("a line on stderr", file=sys.stderr)
    ctx.log.info("an info record")
    ctx.log.warning("a warning record")
    ctx.progress(1, of=4, unit="epoch")
    deadline = time.time() + 120
    while not os.path.exists(gate):  # the test opens it once it has seen the lines above
        if time.time() > deadline:
            raise TimeoutError("the test never opened the gate")
        time.sleep(0.05)
    print("the gate is open")
    return "talked"


@il.step
def after(said: str) -> str:
    print(f"after got {said}")
    return said.upper()


@il.pipeline(name="live")
def live(gate: str = ""):
    return after(said=talk(gate=gate))
'''

MLFLOW_PIPELINE = '''
import interlock as il


@il.step
def track(store: str) -> int:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{store}")
    print("tracking store ready")
    return len(mlflow.search_experiments())


@il.pipeline(name="tracked")
def tracked(store: str = "mlflow.db"):
    return track(store=store)
'''


def _needs(backend: str) -> None:
    module = {"flyte-local": "flytekit", "kfp-local": "kfp.local"}.get(backend)
    if module:
        pytest.importorskip(module, reason=f"{backend} needs the {module.split('.')[0]} extra")


class Reader:
    """The merged stdout+stderr of `interlock run`, line by line, as it arrives."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.proc, self.lines, self._q = proc, [], queue.Queue()  # type: ignore[var-annotated]
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def until(self, predicate, timeout: float = 90) -> str:  # type: ignore[no-untyped-def]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if predicate(line):
                return line
        pytest.fail("expected line never came; output so far:\n" + "\n".join(self.lines))

    def rest(self, timeout: float = 90) -> str:
        self.proc.wait(timeout=timeout)
        while (line := self._q.get(timeout=10)) is not None:
            self.lines.append(line)
        return "\n".join(self.lines)


def start(tmp_path: Path, target: str, backend: str, *args: str) -> subprocess.Popen[str]:
    (tmp_path / "live_pipe.py").write_text(textwrap.dedent(PIPELINE))
    (tmp_path / "tracked_pipe.py").write_text(textwrap.dedent(MLFLOW_PIPELINE))
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "MLFLOW_LOGGING_LEVEL")}
    return subprocess.Popen(
        [sys.executable, "-m", "interlock.core.cli.main", "run", target, "--backend", backend,
         "--workdir", str(tmp_path / "wd"), "--no-cache", *args],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_lines_stream_prefixed_while_the_step_runs(tmp_path: Path, backend: str) -> None:
    _needs(backend)
    gate = tmp_path / "gate"
    proc = start(tmp_path, "live_pipe.py:live", backend, "-p", f"gate={gate}", "--heartbeat", "0.2")
    out = Reader(proc)
    try:
        out.until(lambda s: ".. talk" in s and "started" in s)
        first = out.until(lambda s: "talk | " in s)
        assert first.endswith("talk | waiting for the gate")
        assert out.until(lambda s: "talk | " in s).endswith("talk | a line on stderr")
        assert out.until(lambda s: "talk | " in s).endswith("talk | an info record")  # ctx.log.info is not dropped
        assert out.until(lambda s: "talk | " in s).endswith("talk | WARNING a warning record")
        beat = out.until(lambda s: ".. talk" in s and "running" in s)
        assert "epoch 1/4 (25%)" in out.until(lambda s: ".. talk" in s and "epoch" in s), beat
        assert "last: a warning record" in out.lines[-1]
        assert proc.poll() is None  # all of that while the step still waits for the gate
    finally:
        gate.write_text("open")
    text = out.rest()
    assert proc.returncode == 0, text
    lines = out.lines
    opened = next(i for i, s in enumerate(lines) if s.endswith("talk | the gate is open"))
    ended = next(i for i, s in enumerate(lines) if "ok talk" in s)
    after = next(i for i, s in enumerate(lines) if s.endswith("after | after got talked"))
    assert opened < ended < after
    assert lines[-3:][0].startswith("live: succeeded") or "live: succeeded" in text
    assert "\x1b[" not in text  # no colour codes into a pipe
    # Only the steps' lines: no kfp executor log, no flytekit chatter.
    for chatter in ("executor_input", "KFP Executor", "Running pipeline", "Streamed logs", "-----", "flytekit"):
        assert chatter not in text, chatter


def test_verbose_shows_kfps_own_log_without_colour_codes(tmp_path: Path) -> None:
    _needs("kfp-local")
    gate = tmp_path / "gate"
    gate.write_text("open")
    proc = start(tmp_path, "live_pipe.py:live", "kfp-local", "-p", f"gate={gate}", "--verbose")
    text = Reader(proc).rest()
    assert proc.returncode == 0, text
    assert "Got executor_input" in text and "Running pipeline: 'live'" in text
    assert "talk | waiting for the gate" in text  # the step's lines, prefixed, as well
    assert "\x1b[" not in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlflow_table_creation_only_with_verbose(tmp_path: Path, backend: str) -> None:
    _needs(backend)
    pytest.importorskip("mlflow", reason="needs the mlflow extra")
    quiet = start(tmp_path, "tracked_pipe.py:tracked", backend, "-p", f"store={tmp_path / 'a.db'}")
    text = Reader(quiet).rest(timeout=180)
    assert quiet.returncode == 0, text
    assert "track | tracking store ready" in text
    assert "Creating initial MLflow database tables" not in text
    loud = start(tmp_path, "tracked_pipe.py:tracked", backend, "-p", f"store={tmp_path / 'b.db'}", "--verbose")
    text = Reader(loud).rest(timeout=180)
    assert loud.returncode == 0, text
    assert "Creating initial MLflow database tables" in text


def test_il_run_streams_and_ends_with_a_summary(tmp_path: Path) -> None:
    """il.run with its default console, from a script whose output is a pipe."""
    (tmp_path / "live_pipe.py").write_text(textwrap.dedent(PIPELINE))
    gate = tmp_path / "gate"
    gate.write_text("open")
    script = textwrap.dedent(f'''
        import interlock as il
        from live_pipe import live
        il.run(live, backend="local", workdir={str(tmp_path / "wd")!r}, gate={str(gate)!r})
    ''')
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "talk | waiting for the gate" in proc.stdout  # what a step prints stays on stdout
    err = proc.stderr
    assert "talk | an info record" in err and "talk | WARNING a warning record" in err
    assert ".. talk" in err and "ok after" in err
    assert "live: succeeded in" in err and "receipt:" in err
    assert "\x1b[" not in proc.stdout + err


def test_a_terminal_gets_rich_output_with_the_same_lines(tmp_path: Path) -> None:
    """On a terminal (a pty here) with rich installed: colour, a live footer, the same step lines."""
    pytest.importorskip("rich", reason="rich renders the terminal view")
    import pty

    (tmp_path / "live_pipe.py").write_text(textwrap.dedent(PIPELINE))
    gate = tmp_path / "gate"
    gate.write_text("open")
    primary, secondary = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.core.cli.main", "run", "live_pipe.py:live", "--workdir", str(tmp_path / "wd"),
         "-p", f"gate={gate}"], cwd=tmp_path, env=env, stdin=secondary, stdout=secondary, stderr=secondary,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # the pty closes when the process ends
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(primary)
    text = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, text
    assert "\x1b[" in text  # colour on a terminal
    for line in ("talk | waiting for the gate", "talk | an info record", "talk | WARNING a warning record",
                 "after | after got talked"):
        assert line in text
    assert "live: succeeded" in text


BROKEN = '''
import os

import interlock as il

if os.environ.get("INTERLOCK_LIVE"):  # imported again inside kfp's task subprocess: fails there only
    raise RuntimeError("this module cannot be imported inside the task")


@il.step
def lonely(x: int) -> int:
    return x


@il.pipeline(name="broken")
def broken(x: int = 1):
    return lonely(x=x)
'''


def test_kfp_log_is_shown_when_a_task_fails_before_its_step_runs(tmp_path: Path) -> None:
    """Without --verbose kfp's log is kept back, but it is all there is when the shim never ran."""
    _needs("kfp-local")
    (tmp_path / "broken_pipe.py").write_text(textwrap.dedent(BROKEN))
    proc = start(tmp_path, "broken_pipe.py:broken", "kfp-local")
    text = Reader(proc).rest()
    assert proc.returncode == 1, text
    assert "lonely | the task failed before the step ran; kfp's log of it:" in text
    assert "lonely | RuntimeError: this module cannot be imported inside the task" in text
    assert "see the kfp log above" in text
