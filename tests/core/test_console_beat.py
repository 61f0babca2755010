"""The console's heartbeat thread runs only while a step may be running: a run served all
from the cache starts none (a thread started and joined is a tenth of a millisecond a run),
and a step that starts gets its beat."""

from __future__ import annotations

import io
import threading
import time

from interlock.core.report.console import RunConsole


def beats() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "interlock-heartbeat"]


def test_a_cached_run_starts_no_heartbeat_and_a_running_step_gets_one(tmp_path) -> None:
    err = io.StringIO()
    console = RunConsole(err, out=io.StringIO(), style="plain", heartbeat_s=0.0)
    with console.watching(tmp_path):
        console("a", "cached", "abc123")
        assert beats() == []
        console("b", "started", "")
        assert len(beats()) == 1
        console("c", "started", "")
        assert len(beats()) == 1  # one per run, not per step
        deadline = time.monotonic() + 5
        while "running" not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "b" in err.getvalue() and "running" in err.getvalue()  # the beat speaks of the quiet step
    assert beats() == []
