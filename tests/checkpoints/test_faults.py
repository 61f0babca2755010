"""SIGKILL a process in the middle of saving a ~50 MB checkpoint, many times.

After every kill, loading must give either the previous complete checkpoint or the new
complete one, with content equal (by sha256 computed here, independently of the store's
manifest) to what that step wrote; never a torn one, never an error. A writer that said
``done`` before it died must have committed the new one.

SIGKILL leaves the page cache intact, so this checks atomicity (the commit order and the
rename), not durability across a power loss (that is what the fsyncs are for).
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkpoints import checkpoint_writer

from interlock.core.checkpoint.local import LocalCheckpointStore

HELPER = Path(__file__).with_name("checkpoint_writer.py")
KEY = "fault-test/run-1/train"
PART_BYTES = 10 << 20
KEEP = 2
SEED = 20261129




class Writer:
    """One writer process, started and waiting (payload built) until ``go``."""

    live: list[Writer] = []

    def __init__(self, root: Path, step: int, parts: int, durable: bool) -> None:
        self.step = step
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        args = [
            str(root),
            KEY,
            str(step),
            str(PART_BYTES),
            str(parts),
            str(KEEP),
            "1" if durable else "0",
        ]
        self.proc = subprocess.Popen(
            [sys.executable, str(HELPER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        Writer.live.append(self)

    @classmethod
    def kill_all(cls) -> None:
        """Kill writers left over by a failed assertion (they would save on stdin EOF)."""
        for w in cls.live:
            if w.proc.poll() is None:
                w.proc.kill()
            w.proc.communicate()
        cls.live.clear()

    def go(self) -> float:
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", (
            f"writer failed to start: {line!r} {self.proc.stderr.read()}"
        )
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return time.monotonic()

    def finish(self) -> bool:
        """Wait for the end; True when the writer reported a completed save."""
        out, err = self.proc.communicate(timeout=60)
        if self.proc.returncode not in (0, -signal.SIGKILL):
            raise AssertionError(f"writer failed (rc {self.proc.returncode}): {err}")
        return "done" in out


def test_sigkill_during_save_quick(tmp_path: Path) -> None:
    """Always run: 12 kills of a 20 MiB save, without fsync (irrelevant to a SIGKILL)."""
    try:
        run_trials(tmp_path, trials=12, parts=2, min_each=1, durable=False)
    finally:
        Writer.kill_all()


@pytest.mark.slow
def test_sigkill_during_save_never_exposes_a_torn_checkpoint(tmp_path: Path) -> None:
    """The full check: 50 kills (more with INTERLOCK_FAULT_TRIALS) of a 50 MiB save."""
    trials = int(os.environ.get("INTERLOCK_FAULT_TRIALS", "50"))
    try:
        run_trials(tmp_path, trials=trials, parts=5, min_each=3, durable=True)
    finally:
        Writer.kill_all()


def run_trials(tmp_path: Path, *, trials: int, parts: int, min_each: int, durable: bool) -> None:
    helper = checkpoint_writer
    root = tmp_path / "store"
    store = LocalCheckpointStore(root)
    digests: dict[int, dict[str, str]] = {}

    def expected(step: int) -> dict[str, str]:
        if step not in digests:
            digests[step] = helper.part_digests(step, PART_BYTES, parts)
        return digests[step]

    def check_latest(allowed: set[int]) -> int:
        loaded = store.load_latest(KEY)
        assert loaded is not None
        step = loaded.info.step
        assert step in allowed, f"loaded step {step}, expected one of {sorted(allowed)}"
        got = {n: hashlib.sha256(loaded.read_bytes(n)).hexdigest() for n in loaded.names}
        assert got == expected(step), f"content of step {step} is not what step {step} wrote"
        return step

    # Calibrate: how long does one save (and prune) take here, while the next writer
    # starts up beside it as in the trials below?
    durations = []
    w = Writer(root, 1, parts, durable)
    for step in (1, 2):
        start = w.go()
        nxt = Writer(root, step + 1, parts, durable)
        assert w.finish()
        durations.append(time.monotonic() - start)
        w = nxt
    save_s = max(durations)
    committed = check_latest({2})

    rng = random.Random(SEED)
    outcomes = {"old": 0, "new": 0}
    torn_seen = 0
    step, writer = 3, w
    bound = KEEP  # most committed checkpoints there may be now
    for _ in range(trials):
        delay = rng.uniform(0.0, 1.2 * save_s)
        start = writer.go()
        # Start the next writer now: it builds its payload while this one is killed and
        # checked (it only touches the store after its own ``go``).
        nxt = Writer(root, step + 1, parts, durable)
        time.sleep(max(0.0, start + delay - time.monotonic()))
        writer.proc.send_signal(signal.SIGKILL)
        said_done = writer.finish()

        kdir = store.key_dir(KEY)
        torn_seen += any(n.startswith(".tmp-") for n in os.listdir(kdir))
        got = check_latest({committed, step})
        if said_done:
            assert got == step, "a writer that reported done must have committed"
        outcomes["new" if got == step else "old"] += 1
        committed = got
        listed = [i.step for i in store.list(KEY)]
        assert listed == sorted(listed) and listed[-1] == committed
        # Each commit whose prune was cut short may leave one extra; a finished one, none.
        if said_done:
            bound = KEEP
        elif got == step:
            bound += 1
        assert len(listed) <= bound, (listed, bound)
        writer, step = nxt, step + 1

    # The kills must have spanned the save: both outcomes, and some mid-write leftovers.
    assert outcomes["old"] >= min_each and outcomes["new"] >= min_each, outcomes
    assert torn_seen >= min_each, f"only {torn_seen} kills left a temp dir: kills missed the writes"

    # A normal save after all that commits, cleans every leftover and prunes to KEEP.
    writer.go()
    assert writer.finish()
    assert check_latest({step}) == step
    assert not [n for n in os.listdir(store.key_dir(KEY)) if n.startswith(".tmp-")]
    assert len(store.list(KEY)) == KEEP
    print(f"save ~{save_s:.2f}s; outcomes {outcomes}; kills leaving temp dirs: {torn_seen}")
