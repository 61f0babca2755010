"""LocalCheckpointStore at disk speed (issue 12): one read per file, memory bounded by the
state, pruning after the commit and never of the committed latest, even when killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from checkpoints import contract

from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.local import LocalCheckpointStore

KEY = contract.KEY
MiB = 1 << 20


class CountingStore(LocalCheckpointStore):
    """Counts the opens of each data file (how many times a load reads it)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.opens: dict[str, int] = {}

    def _opener(self, cdir, info):
        inner = super()._opener(cdir, info)

        def counted(name: str):
            self.opens[name] = self.opens.get(name, 0) + 1
            return inner(name)

        return counted


def test_a_load_reads_each_file_once(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "s")
    ck = Checkpointer(store, KEY)
    ck.save(contract.payload(1, 2 * MiB), step=1)
    assert ck.load() == contract.payload(1, 2 * MiB)
    assert store.opens == {"state.bin": 1}
    src = tmp_path / "model"
    src.mkdir()
    (src / "a.bin").write_bytes(b"a" * 1000)
    (src / "b.bin").write_bytes(b"b" * 2000)
    ck.save(src, step=2)
    store.opens.clear()
    out = ck.load(tmp_path / "out")
    assert (out / "b.bin").read_bytes() == b"b" * 2000
    assert store.opens == {"a.bin": 1, "b.bin": 1}


def _peak_of(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_of_a_load_stays_near_the_state_size(tmp_path: Path) -> None:
    size = 48 * MiB
    ck = Checkpointer(LocalCheckpointStore(tmp_path / "s", durable=False), KEY)
    ck.save(os.urandom(size), step=1)
    got: list[bytes] = []
    peak = _peak_of(lambda: got.append(ck.load()))
    assert len(got[0]) == size
    got.clear()
    assert peak < size + 4 * MiB, f"load of a {size // MiB} MiB state peaked at {peak / MiB:.1f} MiB"

    def stream() -> None:
        with ck.open_read() as f:
            while f.read(4 * MiB):
                pass

    peak = _peak_of(stream)
    assert peak < 24 * MiB, f"a streamed read peaked at {peak / MiB:.1f} MiB"  # a few chunks, not the state

    buf = bytearray(16 * MiB)

    def stream_into() -> None:
        with ck.open_read() as f:
            while f.readinto(buf):
                pass

    peak = _peak_of(stream_into)
    # straight into the caller's buffer: no chunk-sized bytes allocated on the way
    assert peak < 2 * MiB, f"readinto a reused buffer peaked at {peak / MiB:.1f} MiB"

    def read_the_end_first() -> None:  # what torch.load does: the zip directory is at the end
        with ck.open_read() as f:
            f.seek(-4, os.SEEK_END)
            assert len(f.read()) == 4

    peak = _peak_of(read_the_end_first)
    # the whole file is checked before its end is handed out, through one small scratch buffer
    assert peak < 2 * MiB, f"checking the file before its end peaked at {peak / MiB:.1f} MiB"

    big = tmp_path / "model.bin"
    big.write_bytes(os.urandom(size))
    ck.save(big, step=2)
    peak = _peak_of(lambda: ck.load(tmp_path / "restored"))
    assert (tmp_path / "restored" / "model.bin").stat().st_size == size
    assert peak < 24 * MiB, f"restoring a file checkpoint peaked at {peak / MiB:.1f} MiB"


WRITER = textwrap.dedent(
    """
    import os, sys, time
    from interlock.core.checkpoint import local as checkpoint_local
    from interlock.core.checkpoint.checkpointer import Checkpointer

    root, mode = sys.argv[1], sys.argv[2]
    real_remove = checkpoint_local.remove_tree

    def slow_remove(path):
        if ".tmp-pruned-" in str(path):
            print("pruning", flush=True)
            time.sleep(0.5)
        real_remove(path)

    checkpoint_local.remove_tree = slow_remove
    ck = Checkpointer(checkpoint_local.LocalCheckpointStore(root), "k/run/step", keep=1)
    for step in (1, 2, 3):
        ck.save(str(step).encode() * 1000, step=step)
        print(f"committed {step}", flush=True)
    print("saved", flush=True)
    if mode == "hang":
        time.sleep(60)  # killed here, in the middle of the prune
    # mode "exit": return normally; the interpreter waits for the prune
    """
)


def _writer(tmp_path: Path, mode: str) -> subprocess.Popen:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    return subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "store"), mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_a_killed_prune_never_deletes_the_committed_latest(tmp_path: Path) -> None:
    proc = _writer(tmp_path, "hang")
    try:
        lines = []
        while "pruning" not in lines:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line.strip())
        proc.send_signal(signal.SIGKILL)  # in the middle of deleting a pruned checkpoint
    finally:
        proc.kill()
        proc.communicate()
    # The prune runs beside the saves: the kill lands after commit 2 or 3, whichever the
    # writer had reached. Whatever it had committed, the latest is there and whole.
    committed = max(int(x.split()[1]) for x in lines if x.startswith("committed "))
    store = LocalCheckpointStore(tmp_path / "store")
    ck = Checkpointer(store, "k/run/step", keep=1)
    latest = store.list("k/run/step")[-1].step
    assert latest >= committed >= 2
    assert ck.load() == str(latest).encode() * 1000  # the latest commit is whole
    ck.save(b"4", step=4)
    ck.flush()
    assert [i.step for i in store.list("k/run/step")] == [4]
    assert not [n for n in os.listdir(store.key_dir("k/run/step")) if n.startswith(".tmp-")]


def test_the_process_finishes_its_prune_before_it_exits(tmp_path: Path) -> None:
    proc = _writer(tmp_path, "exit")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "saved" in out and "pruning" in out
    store = LocalCheckpointStore(tmp_path / "store")
    assert [i.step for i in store.list("k/run/step")] == [3]
    assert not [n for n in os.listdir(store.key_dir("k/run/step")) if n.startswith(".tmp-")]


@pytest.mark.parametrize("source", ["bytes", "path"])
def test_save_hashes_what_it_writes(tmp_path: Path, source: str) -> None:
    # The hash runs beside the write (a worker thread): it must still be of the bytes written.
    content = os.urandom(20 * MiB + 7)
    src: object = content
    if source == "path":
        src = tmp_path / "src.bin"
        src.write_bytes(content)
    store = LocalCheckpointStore(tmp_path / "s")
    info = store.save(KEY, {"f": src})  # type: ignore[dict-item]
    assert info.files["f"].digest == contract.digest(content) and info.files["f"].size == len(content)
    loaded = store.load_latest(KEY)
    assert loaded is not None and loaded.read_bytes("f") == content
