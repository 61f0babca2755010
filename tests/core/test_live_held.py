"""live.held(): a backend that runs its steps one after another in this process (flyte-local)
installs the output capture once for the run, not around every step (issue 12, item 2: the
install moved logger levels, and each move flushed logging's caches over every logger), and
what each step prints and logs is still its own."""

from __future__ import annotations

import logging
import sys

from interlock.core.run import live


def test_a_held_capture_is_installed_once_and_each_step_keeps_its_lines(lines, capsys, monkeypatch):
    installs: list[int] = []
    real_install = live._install
    monkeypatch.setattr(live, "_install", lambda: (installs.append(1), real_install())[1])
    stdout_before, stderr_before = sys.stdout, sys.stderr
    root = logging.getLogger()
    handlers_before, level_before = root.handlers[:], root.level
    with live.held():
        assert sys.stdout is stdout_before  # nothing is installed before a step is captured
        with live.capture("a"):
            print("from a")
            logging.getLogger("interlock.step.a").info("a's record")
        router = sys.stdout
        assert router is not stdout_before  # still installed between the steps
        print("between the steps")  # no step runs: passes through, as without a capture
        logging.getLogger("team.module").info("no step, below WARNING: not a line")
        with live.capture("b"):
            assert sys.stdout is router
            print("from b")
    assert installs == [1]
    assert sys.stdout is stdout_before and sys.stderr is stderr_before
    assert root.handlers == handlers_before and root.level == level_before
    assert [(x.node, x.stream, x.text) for x in lines] == [
        ("a", "stdout", "from a"), ("a", "log", "a's record"), ("b", "stdout", "from b"),
    ]
    assert "between the steps" in capsys.readouterr().out


def test_without_a_hold_each_step_installs_and_removes_the_capture(lines, monkeypatch):
    installs: list[int] = []
    real_install = live._install
    monkeypatch.setattr(live, "_install", lambda: (installs.append(1), real_install())[1])
    stdout_before = sys.stdout
    for node in ("a", "b"):
        with live.capture(node):
            print(node)
        assert sys.stdout is stdout_before
    assert installs == [1, 1]
    assert [(x.node, x.text) for x in lines] == [("a", "a"), ("b", "b")]


def test_a_hold_nobody_watches_changes_nothing(capsys):
    stdout_before = sys.stdout
    with live.held(), live.capture("a"):
        assert sys.stdout is stdout_before
        print("plain")
    assert sys.stdout is stdout_before
    assert capsys.readouterr().out == "plain\n"
