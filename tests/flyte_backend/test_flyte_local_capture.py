"""flyte-local installs the steps' output capture once per run (live.held), not per step, and
leaves the process's streams and root logger as it found them (issue 12, item 2)."""

from __future__ import annotations

import dataclasses
import logging
import sys
from pathlib import Path

import pytest
from flyte_pipelines.basic import demo

import interlock as il
from interlock.core.run import live


def test_a_run_installs_the_capture_once_and_puts_everything_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installs: list[int] = []
    real_install = live._install
    monkeypatch.setattr(live, "_install", lambda: (installs.append(1), real_install())[1])
    root = logging.getLogger()
    before = (sys.stdout, sys.stderr, root.handlers[:], root.level)
    spec = dataclasses.replace(demo.spec)
    r = il.run(spec, backend="flyte-local", workdir=tmp_path / "w", snapshot="h1")  # the default console watches
    assert r.succeeded
    ran = [n for n, s in r.steps.items() if s.status == "succeeded"]
    assert len(ran) >= 3, r.steps  # several steps ran, each captured
    assert installs == [1]  # one per step before live.held()
    assert (sys.stdout, sys.stderr, root.handlers[:], root.level) == before
