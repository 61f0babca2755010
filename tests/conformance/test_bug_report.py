"""What `interlock run` prints for a bug in a step, on every backend: under ``retry=3`` each
retry says so and the last attempt says once why it is not retried again (nothing claims it
was "not retried" after three retries), and the default traceback tail holds the user's own
frame (their file and line) even when the error is raised deep in a library."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from backends import runnable_backends

BUG = '''
import json

import interlock as il


@il.step(retry=3)
def parse(text: str) -> dict:
    return json.loads(text)


@il.pipeline(name="retried-bug")
def retried_bug(text: str = "{not json"):
    parse(text=text)
'''


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_retried_bug_says_once_why_it_stops_and_shows_the_users_line(tmp_path: Path, backend: str) -> None:
    (tmp_path / "retried_bug.py").write_text(textwrap.dedent(BUG))
    line = textwrap.dedent(BUG).splitlines().index("    return json.loads(text)") + 1
    proc = subprocess.run(
        [sys.executable, "-m", "interlock.core.cli.main", "run", "retried_bug.py:retried_bug", "--backend", backend,
         "--workdir", str(tmp_path / "wd"), "--run-id", "b1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "not retried" not in out
    assert out.count("retrying now (Retry(3): any failure)") == 3, out
    assert out.count("giving up after 3 retries of any failure") == 1, out
    assert "step 'parse' failed (FATAL) after 4 attempt(s)" in out
    tail = proc.stderr.split("traceback (last lines; --debug for all of it):", 1)[1]
    assert f'{tmp_path / "retried_bug.py"}", line {line}, in parse' in tail
    assert "json.decoder.JSONDecodeError: Expecting property name" in tail
