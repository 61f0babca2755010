"""core/run/live.py and core/report/console.py in-process: what a step prints and logs becomes its lines
while someone watches, and nothing changes when nobody does."""

from __future__ import annotations

import io
import logging
import sys
import threading

import interlock as il
from interlock.core.report.console import RunConsole
from interlock.core.run import live
from interlock.core.run.live_line import StepLine


def test_a_captured_step_prints_and_logs_its_own_lines(lines):
    stdout_before, stderr_before = sys.stdout, sys.stderr
    with live.capture("fit"):
        print("hello")
        print("half", end="")
        print(" a line")
        print("oops", file=sys.stderr)
        logging.getLogger("interlock.step.fit").info("an info record")  # unconfigured logging drops INFO
        logging.getLogger("team.module").warning("a warning")
        print("no newline at the end", end="")
    assert sys.stdout is stdout_before and sys.stderr is stderr_before  # put back
    assert [(x.node, x.stream, x.level, x.text) for x in lines] == [
        ("fit", "stdout", "", "hello"),
        ("fit", "stdout", "", "half a line"),
        ("fit", "stderr", "", "oops"),
        ("fit", "log", "INFO", "an info record"),
        ("fit", "log", "WARNING", "a warning"),
        ("fit", "stdout", "", "no newline at the end"),
    ]


def test_a_thread_the_step_starts_is_the_steps_and_a_progress_bar_shows_its_last_state(lines):
    with live.capture("fit"):
        t = threading.Thread(target=lambda: print("from a worker thread"))
        t.start()
        t.join()
        sys.stderr.write("10%\r50%\r100%\n")
    assert [(x.node, x.text) for x in lines] == [("fit", "from a worker thread"), ("fit", "100%")]


def test_foreign_info_is_held_back_unless_verbose(lines, monkeypatch):
    monkeypatch.setattr(logging.getLogger("mlflow"), "level", logging.INFO)  # as mlflow configures itself
    with live.capture("fit"):
        logging.getLogger("mlflow.store.db.utils").info("Creating initial MLflow database tables...")
        logging.getLogger("urllib3.connectionpool").warning("Retrying connection")
    assert [x.text for x in lines] == ["Retrying connection"]
    lines.clear()
    with live.verbosity(True), live.capture("fit"):
        logging.getLogger("mlflow.store.db.utils").info("Creating initial MLflow database tables...")
    # Once, in the step's stream; formatted by MLflow's own handler if an earlier import of
    # mlflow installed one (it does not propagate), else plain.
    assert len(lines) == 1 and lines[0].text.endswith("Creating initial MLflow database tables...")
    assert logging.getLogger("mlflow").level == logging.INFO  # its level is put back


def test_nobody_watching_changes_nothing(capsys):
    stdout_before = sys.stdout
    with live.capture("fit"):
        assert sys.stdout is stdout_before
        print("plain")
    assert capsys.readouterr().out == "plain\n"


def test_relay_mode_writes_tagged_lines_a_parent_decodes(monkeypatch, capsys):
    monkeypatch.setenv(live.EnvName.LIVE, live.RELAY)
    with live.capture("fit"):
        print("to the parent")
    out = capsys.readouterr().out
    decoded = [live.decode(raw) for raw in out.splitlines()]
    assert [(d.node, d.text) for d in decoded if d] == [("fit", "to the parent")]
    assert live.decode("an ordinary line") is None


def test_console_prefixes_lines_and_stdout_stays_on_stdout():
    err, out = io.StringIO(), io.StringIO()
    console = RunConsole(err, out=out, style="plain")
    with console.watching():
        console("fit", "started", "")
        with live.capture("fit"):
            print("hello")
            logging.getLogger("interlock.step.fit").warning("careful")
        console("fit", "succeeded", "1.00s")
    assert out.getvalue().endswith("   fit | hello\n")
    text = err.getvalue()
    assert ".. fit" in text and "   fit | WARNING careful" in text and "ok fit" in text
    assert "\x1b[" not in text + out.getvalue()


def test_heartbeat_says_how_far_a_quiet_step_is(tmp_path):
    from interlock.core.run.metrics import MetricLog, metrics_path

    err = io.StringIO()
    console = RunConsole(err, out=io.StringIO(), style="plain", heartbeat_s=0.0)
    with console.watching(tmp_path):
        console("fit", "started", "")
        MetricLog("fit", metrics_path(tmp_path, "fit")).log("epoch", 3, kind="progress", of=10)
        console.heartbeat()
    assert "fit                      running" in err.getvalue() and "epoch 3/10 (30%)" in err.getvalue()


def test_il_run_false_is_silent_and_the_default_ends_with_a_summary(tmp_path, capsys):
    @il.step
    def say(x: int) -> int:
        print("said", x)
        return x

    @il.pipeline(name="say")
    def p(x: int = 1):
        return say(x=x)

    il.run(p, workdir=tmp_path, progress=False)
    out, err = capsys.readouterr()
    assert out == "said 1\n" and err == ""
    il.run(p, workdir=tmp_path)
    out, err = capsys.readouterr()
    assert "   say | said 1" in out
    assert ".. say" in err and "say: succeeded in" in err


def test_a_chatty_step_still_gets_a_beat_when_its_progress_moves(tmp_path):
    from interlock.core.run.metrics import MetricLog, metrics_path

    err = io.StringIO()
    console = RunConsole(err, out=io.StringIO(), style="plain", heartbeat_s=3600)
    with console.watching(tmp_path):
        console("fit", "started", "")
        console._running["fit"].beat = -1e9  # its last beat was long ago
        console.line(StepLine("fit", "batch 1 of many"))  # just said something: not quiet
        console.heartbeat()
        assert "running" not in err.getvalue()  # no progress reported: the lines are enough
        MetricLog("fit", metrics_path(tmp_path, "fit")).log("epoch", 2, kind="progress", of=5)
        console.heartbeat()
    assert "epoch 2/5 (40%)" in err.getvalue()
